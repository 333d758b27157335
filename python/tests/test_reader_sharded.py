"""Sharded arrays written by zarr-python read through their inner chunks
(the batched path): equal to zarr-python element by element, with the index
at either end, with and without crc32c, with empty inner chunks, whole, in
part and with steps; corrupt shards give errors naming the shard and the
inner chunk; on the GPU, equal to the CPU path."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zarr.codecs as zc
from conftest import cupy_or_skip

from zarrs_nvcomp import DecodeError, open_array

SELECTIONS = [
    ...,
    (slice(3, 61, 1), slice(10, 41)),
    (slice(1, None, 3), slice(2, None, 5)),
    (17, slice(None)),
    (slice(0, 4), slice(None)),  # a sixteenth of the rows
]


def write(path, location: str, crc: bool, inner=None) -> np.ndarray:
    rng = np.random.default_rng(3)
    data = np.round(rng.standard_normal((64, 48)).cumsum(axis=1), 2).astype("float32")
    data[:8, :12] = 0  # two inner chunks of fill values: empty in the index
    index_codecs = [zc.BytesCodec(), zc.Crc32cCodec()] if crc else [zc.BytesCodec()]
    z = zarr.create_array(
        str(path),
        shape=data.shape,
        chunks=(32, 24),
        dtype=data.dtype,
        fill_value=0,
        compressors=None,  # zarr-python's default would compress the shards as a whole
        serializer=zc.ShardingCodec(
            chunk_shape=(8, 6),
            codecs=inner or [zc.BytesCodec(), zc.ZstdCodec(level=1)],
            index_codecs=index_codecs,
            index_location=location,
        ),
    )
    z[...] = data
    return data


def index(shard: bytes, location: str, crc: bool, n: int = 16) -> np.ndarray:
    size = 16 * n + 4 * crc
    raw = shard[-size:] if location == "end" else shard[:size]
    return np.frombuffer(raw[: 16 * n], dtype="<u8").reshape(n, 2)


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("crc", [True, False])
@pytest.mark.parametrize("codec", ["zstd", "gzip+crc32c"])
def test_shards_read_like_zarr_python(tmp_path, location, crc, codec):
    inner = {
        "zstd": None,
        "gzip+crc32c": [zc.BytesCodec(), zc.GzipCodec(level=1), zc.Crc32cCodec()],
    }[codec]
    path = tmp_path / "a.zarr"
    data = write(path, location, crc, inner)
    shard = (path / "c" / "0" / "0").read_bytes()
    assert (index(shard, location, crc)[:2] == np.iinfo("u8").max).all(), "empty inner chunks"
    array = open_array(str(path))
    assert array.batched_algorithm == codec.split("+")[0]
    want = np.asarray(zarr.open_array(str(path), mode="r")[...])
    np.testing.assert_array_equal(want, data)
    for selection in SELECTIONS:
        np.testing.assert_array_equal(array.read(selection, device="cpu"), want[selection])


@pytest.mark.parametrize("location", ["end", "start"])
def test_corrupt_shards_name_the_shard_and_the_inner_chunk(tmp_path, location):
    path = tmp_path / "a.zarr"
    write(path, location, True)
    key = path / "c" / "1" / "1"
    good = key.read_bytes()
    offset, nbytes = index(good, location, True)[5]  # inner chunk [1, 1]
    bad = bytearray(good)
    bad[offset : offset + nbytes] = b"\xa5" * nbytes
    key.write_bytes(bytes(bad))
    array = open_array(str(path))
    with pytest.raises(DecodeError, match=r"c/1/1 \(inner chunk \[1, 1\]\)"):
        array.read(..., device="cpu")
    key.write_bytes(good[: len(good) // 2])
    with pytest.raises(DecodeError, match="c/1/1"):
        array.read(..., device="cpu")
    # The other shards still read.
    want = np.asarray(zarr.open_array(str(path), mode="r")[:32])
    np.testing.assert_array_equal(array.read(slice(0, 32), device="cpu"), want)


@pytest.mark.gpu
@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("crc", [True, False])
def test_gpu_reads_shards_like_the_cpu_path(tmp_path, location, crc):
    cp = cupy_or_skip()
    path = tmp_path / "a.zarr"
    write(path, location, crc)
    array = open_array(str(path))
    for selection in SELECTIONS:
        got = array.read(selection, device="cuda")
        assert isinstance(got, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(got), array.read(selection, device="cpu"))
