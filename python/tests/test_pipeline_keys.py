"""The pipeline hands a read to the reader only where every chunk key zarr
gives is the key zarr itself encodes for its coordinates: the keys of
zarr's two encodings are parsed by their pattern, any other encoding's by
encoding the coordinates again."""

from __future__ import annotations

import pytest
from zarr.core.chunk_key_encodings import ChunkKeyEncoding
from zarr.core.metadata.v2 import ArrayV2Metadata
from zarr.core.metadata.v3 import ArrayV3Metadata

from zarrs_nvcomp._reader_request import _ChunkKeys


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
