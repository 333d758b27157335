"""zarr 3 arrays with the nvcomp_batch codec: dtypes, shapes, edge and missing chunks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import ALL_ALGORITHMS, CPU_ALGORITHMS, cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec

CASES = [
    # dtype, shape, chunks
    ("uint8", (100,), (30,)),
    ("int16", (17, 23), (8, 10)),
    ("float32", (16, 16), (8, 8)),
    ("float64", (5, 7, 9), (2, 3, 4)),
    ("uint64", (40,), (40,)),
    ("bool", (33, 3), (10, 2)),
]


def make_data(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind == "f":
        return np.cumsum(rng.standard_normal(shape), axis=-1).round(2).astype(dtype)
    return rng.integers(0, 50, size=shape).astype(dtype)


def roundtrip(algorithm, dtype, shape, chunks, device=None, batch_size=None):
    codec = NvCompBatchZarrCodec(algorithm=algorithm, device=device)
    data = make_data(dtype, shape)
    with zarrs_nvcomp.set_zarr_batch_size(batch_size):
        store = zarr.storage.MemoryStore()
        z = zarr.create_array(store, shape=shape, chunks=chunks, dtype=dtype, compressors=codec)
        z[:] = data
        z2 = zarr.open_array(store)
        np.testing.assert_array_equal(z2[:], data)
        # a partial region, crossing chunk borders
        region = tuple(slice(1, max(2, s - 1)) for s in shape)
        np.testing.assert_array_equal(z2[region], data[region])
    return z2


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
@pytest.mark.parametrize(("dtype", "shape", "chunks"), CASES)
def test_roundtrip(algorithm, dtype, shape, chunks):
    roundtrip(algorithm, dtype, shape, chunks)


@pytest.mark.parametrize("batch_size", [1, 3, None])
def test_batch_sizes(batch_size):
    roundtrip("zstd", "float32", (20, 20), (6, 6), batch_size=batch_size)


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_missing_chunks(algorithm):
    store = zarr.storage.MemoryStore()
    codec = NvCompBatchZarrCodec(algorithm=algorithm)
    with zarrs_nvcomp.set_zarr_batch_size():
        z = zarr.create_array(
            store, shape=(40, 40), chunks=(10, 10), dtype="int32", fill_value=7, compressors=codec
        )
        z[0:10, 0:10] = 1
        z[25:35, 30:40] = 2
        expected = np.full((40, 40), 7, dtype="int32")
        expected[0:10, 0:10] = 1
        expected[25:35, 30:40] = 2
        np.testing.assert_array_equal(zarr.open_array(store)[:], expected)


def test_one_engine_call_per_batch(monkeypatch):
    calls = []
    orig = zarrs_nvcomp.NvCompBatchCodec.decode_batch_async

    async def spy(self, bufs):
        bufs = list(bufs)
        calls.append(len(bufs))
        return await orig(self, bufs)

    store = zarr.storage.MemoryStore()
    data = make_data("float32", (32, 32))
    zarr.create_array(store, data=data, chunks=(8, 8), compressors=NvCompBatchZarrCodec())
    monkeypatch.setattr(zarrs_nvcomp.NvCompBatchCodec, "decode_batch_async", spy)
    with zarrs_nvcomp.set_zarr_batch_size():
        np.testing.assert_array_equal(zarr.open_array(store)[:], data)
    assert calls == [16]
    calls.clear()
    with zarrs_nvcomp.set_zarr_batch_size(1):
        np.testing.assert_array_equal(zarr.open_array(store)[:], data)
    assert calls == [1] * 16


def test_metadata_and_registry():
    codec = NvCompBatchZarrCodec(algorithm="GZIP", options={"algorithm": 2})
    assert codec.to_dict() == {
        "name": "nvcomp_batch",
        "configuration": {"algorithm": "gzip", "options": {"algorithm": 2}},
    }
    cls = zarr.registry.get_codec_class("nvcomp_batch")
    assert cls is NvCompBatchZarrCodec
    assert cls.from_dict(codec.to_dict()) == codec
    assert codec.backend in ("cpu", "cuda:0")
    with pytest.raises(ValueError, match="valid options"):
        NvCompBatchZarrCodec(algorithm="gzip", options={"level": 2})


def test_set_batch_size_restores():
    before = zarr.config.get("codec_pipeline.batch_size")
    with zarrs_nvcomp.set_zarr_batch_size(64):
        assert zarr.config.get("codec_pipeline.batch_size") == 64
    assert zarr.config.get("codec_pipeline.batch_size") == before


@pytest.mark.skipif(
    sys.version_info < (3, 12),
    reason="itertools.batched, which zarr >= 3.2 uses, needs Python 3.12",
)
def test_unlimited_batch_size_stays_cheap_for_zarrs_batching():
    # itertools.batched allocates a tuple of the batch size per batch, however
    # few chunks a request has: a huge "unlimited" value made each read stall.
    import itertools
    import tracemalloc

    with zarrs_nvcomp.set_zarr_batch_size():
        batch_size = zarr.config.get("codec_pipeline.batch_size")
    tracemalloc.start()
    try:
        assert list(itertools.batched(range(3), batch_size)) == [(0, 1, 2)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert batch_size >= 16384, "a 1 GiB array of 64 KiB chunks must fit one batch"
    assert peak < 4 << 20, f"batching 3 chunks allocated {peak} bytes"


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ALL_ALGORITHMS)
@pytest.mark.parametrize(("dtype", "shape", "chunks"), CASES)
def test_roundtrip_gpu_buffers(algorithm, dtype, shape, chunks):
    cp = cupy_or_skip()
    data = make_data(dtype, shape)
    codec = NvCompBatchZarrCodec(algorithm=algorithm, device="cuda")
    with zarr.config.enable_gpu(), zarrs_nvcomp.set_zarr_batch_size():
        store = zarr.storage.MemoryStore()
        z = zarr.create_array(store, shape=shape, chunks=chunks, dtype=dtype, compressors=codec)
        z[:] = cp.asarray(data)
        got = zarr.open_array(store)[:]
        assert isinstance(got, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(got), data)
    # and into host memory without enable_gpu()
    np.testing.assert_array_equal(zarr.open_array(store)[:], data)


@pytest.mark.gpu
def test_gpu_chunks_stay_on_device(monkeypatch):
    cp = cupy_or_skip()
    seen = []
    orig = zarrs_nvcomp.NvCompBatchCodec.decode_batch_async

    async def spy(self, bufs):
        bufs = list(bufs)
        seen.extend(type(b) for b in bufs)
        result = await orig(self, bufs)
        seen.extend(type(r) for r in result)
        return result

    data = make_data("float32", (64, 64))
    with zarr.config.enable_gpu():
        store = zarr.storage.MemoryStore()
        codec = NvCompBatchZarrCodec(algorithm="lz4", device="cuda")
        zarr.create_array(store, data=cp.asarray(data), chunks=(16, 16), compressors=codec)
        monkeypatch.setattr(zarrs_nvcomp.NvCompBatchCodec, "decode_batch_async", spy)
        with zarrs_nvcomp.set_zarr_batch_size():
            got = zarr.open_array(store)[:]
    assert seen and all(t is cp.ndarray for t in seen), seen
    np.testing.assert_array_equal(cp.asnumpy(got), data)


ZARRS_WRITTEN = Path(__file__).resolve().parents[2] / "tests" / "fixture" / "zarrs_v3"


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_arrays_written_by_zarrs_read_with_zarr_python(algorithm):
    # Written by zarrs with the Rust codec (tests/zarrs_codec.rs keeps them current).
    z = zarr.open_array(str(ZARRS_WRITTEN / f"{algorithm}.zarr"), mode="r")
    assert isinstance(z.metadata.codecs[-1], NvCompBatchZarrCodec)
    expected = (np.arange(40 * 30, dtype=np.uint32) * 7 % 101).reshape(40, 30)
    np.testing.assert_array_equal(z[:], expected)
