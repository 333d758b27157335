"""Sharding inside sharding round-trips with zarr-python both ways: shards
we write are read by zarr-python, and partial writes into shards that
zarr-python wrote keep them readable. A batched innermost compressor (zstd,
gzip) stored each inner shard as a bare compressed frame, with no index,
and the write returned normally."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from conftest import cupy_or_skip

import zarrs_nvcomp

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
COMPRESSORS = {
    "zstd": {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
    "none": None,
}


def shard(chunk_shape: list[int], codecs: list[dict]) -> dict:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": chunk_shape,
            "codecs": codecs,
            "index_codecs": [BYTES, {"name": "crc32c"}],
            "index_location": "end",
        },
    }


def write_nested(path, compressor: str) -> None:
    inner = [BYTES] + ([COMPRESSORS[compressor]] if COMPRESSORS[compressor] else [])
    path.mkdir()
    metadata = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [64],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [32]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [shard([8], [shard([2], inner)])],
        "attributes": {},
    }
    (path / "zarr.json").write_text(json.dumps(metadata))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("compressor", list(COMPRESSORS))
def test_nested_shards_we_write_read_in_zarr_python(tmp_path, compressor, device):
    path = tmp_path / "a.zarr"
    write_nested(path, compressor)
    data = np.arange(64, dtype="f4") + 1
    # From GPU memory too: the GPU's writes take the same chain classification.
    source = cupy_or_skip().asarray(data) if device == "cuda" else data
    zarrs_nvcomp.open_array(str(path))[:] = source
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[:], data)
    np.testing.assert_array_equal(zarrs_nvcomp.open_array(str(path)).read(device="cpu"), data)


@pytest.mark.parametrize("compressor", list(COMPRESSORS))
def test_partial_writes_into_zarr_pythons_nested_shards_keep_them_readable(tmp_path, compressor):
    path = tmp_path / "a.zarr"
    write_nested(path, compressor)
    data = np.arange(64, dtype="f4") + 1
    zarr.open_array(str(path), mode="r+")[:] = data
    zarrs_nvcomp.open_array(str(path))[5:40] = -1
    data[5:40] = -1
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[:], data)
    np.testing.assert_array_equal(zarrs_nvcomp.open_array(str(path)).read(device="cpu"), data)
