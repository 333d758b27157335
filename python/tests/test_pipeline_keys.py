"""The pipeline hands a read to the reader only where every chunk key zarr
gives is the key zarr itself encodes for its coordinates (the keys of
zarr's two encodings are parsed by their pattern, any other encoding's by
encoding the coordinates again), and where the items are a box of chunks."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from zarr.core.chunk_key_encodings import ChunkKeyEncoding
from zarr.core.metadata.v2 import ArrayV2Metadata
from zarr.core.metadata.v3 import ArrayV3Metadata

from zarrs_nvcomp._reader_request import _ChunkKeys, reader_request


def v3(separator: str, name: str = "default") -> ArrayV3Metadata:
    return ArrayV3Metadata.from_dict(
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [100, 100, 100],
            "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 1, 1]}},
            "chunk_key_encoding": {"name": name, "configuration": {"separator": separator}},
            "codecs": [{"name": "bytes"}],
            "fill_value": 0,
        }
    )


def v2(separator: str) -> ArrayV2Metadata:
    return ArrayV2Metadata.from_dict(
        {
            "zarr_format": 2,
            "shape": [100, 100, 100],
            "dtype": "|u1",
            "chunks": [1, 1, 1],
            "fill_value": 0,
            "order": "C",
            "dimension_separator": separator,
            "compressor": None,
            "filters": None,
        }
    )


METADATA = {
    "default /": (v3("/"), "c/{}/{}/{}"),
    "default .": (v3("."), "c.{}.{}.{}"),
    "v2 in v3 .": (v3(".", "v2"), "{}.{}.{}"),
    "v2 /": (v2("/"), "{}/{}/{}"),
    "v2 .": (v2("."), "{}.{}.{}"),
}


@pytest.mark.parametrize("name", list(METADATA))
def test_keys_zarr_encodes_parse_to_their_coordinates(name):
    metadata, form = METADATA[name]
    keys = _ChunkKeys(metadata, 3)
    for coords in [(0, 0, 0), (1, 20, 99), (10, 0, 7)]:
        key = metadata.encode_chunk_key(coords)
        assert key == form.format(*coords)
        assert keys.parse(key) == coords


@pytest.mark.parametrize("name", list(METADATA))
@pytest.mark.parametrize(
    "coords",
    [
        ("01", "2", "3"),
        ("+1", "2", "3"),
        ("1_0", "2", "3"),
        ("\u0661", "2", "3"),
        (" 1", "2", "3"),
        ("1", "2"),
        ("1", "2", "3", "4"),
        ("", "2", "3"),
    ],
)
def test_keys_zarr_never_encodes_are_not_parsed(name, coords):
    metadata, form = METADATA[name]
    keys = _ChunkKeys(metadata, 3)
    sep = form[1] if form.startswith("c") else form[2]
    body = sep.join(coords)
    key = f"c{sep}{body}" if form.startswith("c") else body
    assert keys.parse(key) is None, key


class SuffixEncoding(ChunkKeyEncoding):
    """An encoding of zarr's API other than its two: keys with a suffix."""

    name = "suffixed"
    separator = "/"

    def decode_chunk_key(self, chunk_key: str) -> tuple[int, ...]:
        return tuple(int(p) for p in chunk_key.removesuffix(".bin").split("/"))

    def encode_chunk_key(self, chunk_coords: tuple[int, ...]) -> str:
        return "/".join(map(str, chunk_coords)) + ".bin"


def test_other_encodings_are_checked_by_encoding_again():
    metadata = v3("/")
    object.__setattr__(metadata, "chunk_key_encoding", SuffixEncoding())
    keys = _ChunkKeys(metadata, 3)
    assert keys.pattern is None
    # A key of another encoding is not taken for one of zarr's.
    assert keys.parse("1/2/3") is None
    assert keys.parse("c/1/2/3") is None


def zarr_items(tmp_path, selection):
    """zarr's read items of ``selection`` of a 2-d array of 4 x 3 chunks,
    as its ``_get_selection`` builds them, and the output's shape."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.indexing import BasicIndexer

    z = zarr.create_array(tmp_path / "a.zarr", shape=(40, 30), chunks=(10, 10), dtype="<i4")
    a = z._async_array
    indexer = BasicIndexer(selection, shape=a.metadata.shape, chunk_grid=a.metadata.chunk_grid)
    prototype = default_buffer_prototype()
    items = [
        (
            a.store_path / a.metadata.encode_chunk_key(coords),
            a.metadata.get_chunk_spec(coords, a.config, prototype=prototype),
            chunk_selection,
            out_selection,
            complete,
        )
        for coords, chunk_selection, out_selection, complete in indexer
    ]
    return items, a.metadata, tuple(indexer.shape)


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ((slice(None), slice(None)), (slice(0, 40, 1), slice(0, 30, 1))),
        ((slice(3, 37, 4), slice(5, 29)), (slice(3, 36, 4), slice(5, 29, 1))),
        ((7, slice(2, 30, 3)), (7, slice(2, 30, 3))),
    ],
)
def test_a_box_of_chunks_is_one_reader_request(tmp_path, selection, expected):
    items, metadata, shape = zarr_items(tmp_path, selection)
    request = reader_request(items, metadata, shape)
    assert request is not None
    assert request.selection == expected


def test_items_that_are_no_box_are_not_a_reader_request(tmp_path):
    items, metadata, shape = zarr_items(tmp_path, (slice(None), slice(None)))
    assert reader_request(items, metadata, shape) is not None
    # A chunk twice in place of another.
    assert reader_request([items[0], *items[:-1]], metadata, shape) is None
    # A chunk left out.
    assert reader_request(items[:-1], metadata, shape) is None
    # One chunk's part of an axis unlike the other chunks' of its column
    # (chunk (1, 1), after (0, 1)).
    getter, spec, (rows, _), out, complete = items[4]
    odd = (getter, spec, (rows, slice(0, 5)), out, complete)
    assert reader_request([*items[:4], odd, *items[5:]], metadata, shape) is None
    # An index array for a part.
    getter, spec, (_, cols), out, complete = items[0]
    indexed = (getter, spec, (np.array([0, 2]), cols), out, complete)
    assert reader_request([indexed, *items[1:]], metadata, shape) is None


def test_a_chunk_path_of_two_lines_is_not_parsed(tmp_path):
    items, metadata, _ = zarr_items(tmp_path, (slice(None), slice(None)))
    keys = _ChunkKeys(metadata, 2)
    paths = [item[0].path for item in items]
    assert keys.parse_all(paths, "") is not None
    assert keys.parse_all([f"{paths[0]}\n{paths[1]}", *paths[2:]], "") is None
    # As many chunk keys as paths, one path holding a key and another line.
    assert keys.parse_all([f"{paths[0]}\nnot a key", *paths[1:]], "") is None
    assert keys.parse_all([f"x{paths[0]}", *paths[1:]], "") is None
