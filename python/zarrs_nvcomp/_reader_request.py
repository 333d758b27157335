"""A zarr read request as one call of the chunk-parallel reader.

zarr hands the codec pipeline one item per chunk: the chunk's store path,
the part of the chunk selected and where it goes in the output. When the
chunks lie in a store the reader opens by URL (a local directory, S3, HTTP)
and the selection is a box of strided ranges (integers and slices), the
whole request is one call of the reader, which fetches the chunks with its
own object_store client, overlapping fetching and decoding, and scatters
them on the device: the same path as `zarrs_nvcomp.read_chunks_parallel`.
"""

from __future__ import annotations

import re
from operator import attrgetter
from typing import Any

__all__ = ["ReaderRequest", "reader_request"]


class ReaderRequest:
    """The array (its store URL, options and path in the store) and the
    basic-indexing selection that a zarr read request reads."""

    __slots__ = ("options", "selection", "url")

    def __init__(self, url: str, options: dict[str, str], selection: tuple[Any, ...]) -> None:
        self.url = url
        self.options = options
        self.selection = selection


def reader_request(
    items: list[Any], metadata: Any, out_shape: tuple[int, ...]
) -> ReaderRequest | None:
    """The reader's request for zarr's read ``items`` (byte getter, chunk
    spec, chunk selection, output selection, complete) of the array with
    ``metadata``, filling an output of ``out_shape``; None where the reader
    cannot serve it (another store, an index array, keys it cannot parse)."""
    from zarrs_nvcomp._stores import location

    ndim = len(metadata.shape)
    first = items[0][0]
    store, path = getattr(first, "store", None), getattr(first, "path", None)
    if ndim == 0 or store is None or path is None:
        return None
    try:
        url, options = location(store, None)
    except TypeError:
        return None
    keys = _ChunkKeys(metadata, ndim)
    prefix = keys.prefix(path)
    if prefix is None:
        return None
    start = f"{prefix}/" if prefix else ""
    getters = [item[0] for item in items]
    try:
        stores = set(map(id, map(attrgetter("store"), getters)))
        paths = list(map(attrgetter("path"), getters))
    except AttributeError:
        return None
    if stores != {id(store)}:
        return None
    all_coords = keys.parse_all(paths, start)
    if all_coords is None:
        return None
    # A box: each chunk's part on an axis depends on its coordinate on that
    # axis alone, and the chunks are every combination of the coordinates,
    # each once. Zarr hands over an item per chunk, thousands for a large
    # read, and this runs before any is fetched: the checks are made a
    # column of items at a time.
    shapes = {tuple(item[1].shape) for item in items}
    selections = [item[2] for item in items]
    if len(shapes) != 1 or {len(s) for s in selections} != {ndim}:
        return None
    if len(set(all_coords)) != len(items):
        return None
    chunk_shape = shapes.pop()
    selected: list[dict[int, Any]] = []
    count = 1
    for axis, size in enumerate(chunk_shape):
        coords = [c[axis] for c in all_coords]
        parts = [s[axis] for s in selections]
        if not set(map(type, parts)) <= {slice, int}:
            return None
        by_coord = dict(zip(reversed(coords), reversed(parts), strict=True))
        if [by_coord[c] for c in coords] != parts:
            return None
        count *= len(by_coord)
        ranges: dict[int, Any] = {}
        for coord, part in by_coord.items():
            origin = coord * size
            if isinstance(part, slice):
                first, stop, step = part.indices(size)
                ranges[origin + first] = range(origin + first, origin + stop, step)
            else:
                ranges[origin + part] = origin + part
        selected.append(ranges)
    if count != len(items):
        return None
    selection = tuple(_axis_selection(parts) for parts in selected)
    if any(s is None for s in selection):
        return None
    shape = tuple(len(range(s.start, s.stop, s.step)) for s in selection if isinstance(s, slice))
    if shape != tuple(out_shape):
        return None
    array_url = f"{url.rstrip('/')}/{prefix}" if prefix else url
    return ReaderRequest(array_url, options, selection)


def _axis_selection(parts: dict[int, Any]) -> Any:
    """One axis's selection: an integer, or a slice whose indices are the
    union of the chunks' ranges; None where they are not one strided range."""
    values = list(parts.values())
    if all(isinstance(v, int) for v in values):
        return values[0] if len(set(values)) == 1 else None
    if not all(isinstance(v, range) for v in values):
        return None
    ranges = sorted((r for r in values if len(r)), key=lambda r: r.start)
    if not ranges:
        return None
    step = ranges[0].step
    expected_start = ranges[0].start
    for r in ranges:
        if r.start != expected_start or (len(r) > 1 and r.step != step):
            return None
        expected_start = r[-1] + step
    return slice(ranges[0].start, ranges[-1][-1] + 1, step)


class _ChunkKeys:
    """Parses chunk keys of one array: the array's path in the store and a
    chunk's coordinates, checked against zarr's own encoding of them."""

    def __init__(self, metadata: Any, ndim: int) -> None:
        from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

        self.metadata = metadata
        encoding = getattr(metadata, "chunk_key_encoding", None)
        if encoding is None:  # zarr v2
            self.separator = metadata.dimension_separator or "."
            self.tag = False
        else:
            self.separator = encoding.separator
            self.tag = getattr(encoding, "name", "default") == "default"
        self.parts = (ndim + self.tag) if self.separator == "/" else 1
        # zarr's two encodings, written as they encode: the coordinates in
        # decimal without leading zeros, joined by the separator (after "c"
        # for the default encoding). Other encodings are checked by encoding
        # the parsed coordinates again.
        self.pattern: re.Pattern[str] | None = None
        if ndim and (
            encoding is None or type(encoding) in (DefaultChunkKeyEncoding, V2ChunkKeyEncoding)
        ):
            sep = re.escape(self.separator)
            number = "(0|[1-9][0-9]*)"
            tag = f"c{sep}" if self.tag else ""
            self.pattern = re.compile(f"{tag}{number}" + f"{sep}{number}" * (ndim - 1))
        self.ndim = ndim

    def prefix(self, path: str) -> str | None:
        """The array's path in the store, from the path of one of its chunks."""
        parts = path.split("/")
        if len(parts) < self.parts or self.parse("/".join(parts[-self.parts :])) is None:
            return None
        return "/".join(parts[: -self.parts])

    def parse_all(self, paths: list[str], start: str) -> list[tuple[int, ...]] | None:
        """The coordinates of the chunks at ``paths``, each ``start`` and a
        chunk key; None where any is not. Keys of zarr's two encodings are
        parsed by one pass of a regular expression over all the paths, one
        per line (a path of its own lines is refused: the lines would not
        be as many as the paths)."""
        if self.pattern is None:
            cut = len(start)
            parsed = [self.parse(path[cut:]) if path.startswith(start) else None for path in paths]
            return None if any(c is None for c in parsed) else parsed  # type: ignore[return-value]
        text = "\n".join(paths)
        if text.count("\n") != len(paths) - 1:
            return None
        lines = re.compile(f"^{re.escape(start)}{self.pattern.pattern}$", re.MULTILINE)
        found = lines.findall(text)
        if len(found) != len(paths):
            return None
        if self.ndim == 1:
            return [(int(number),) for number in found]
        return [tuple(map(int, numbers)) for numbers in found]

    def parse(self, key: str) -> tuple[int, ...] | None:
        """The coordinates of the chunk at ``key`` (relative to the array),
        None where zarr would not encode any chunk's coordinates as ``key``."""
        if self.pattern is not None:
            match = self.pattern.fullmatch(key)
            return None if match is None else tuple(map(int, match.groups()))
        body = key
        if self.tag:
            if not key.startswith("c" + self.separator):
                return None
            body = key[2:]
        try:
            coords = tuple(int(p) for p in body.split(self.separator))
        except ValueError:
            return None
        if self.metadata.encode_chunk_key(coords) != key:
            return None
        return coords
