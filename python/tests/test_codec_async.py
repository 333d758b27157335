"""Awaited engine work: `NvCompBatchCodec.encode_batch_async` and
`decode_batch_async` return and raise what the blocking calls do; zarr's
async API through the zarr 3 codec and through the codec pipeline's engine
path starts no Python thread for its decodes and encodes; cancelled batches
leave no memory behind; the awaitable reads and writes run under uvloop."""

from __future__ import annotations

import asyncio
import random
import resource
import threading

import numpy as np
import pytest
import uvloop
import zarr
import zarr.api.asynchronous as zarr_async
from conftest import CPU_ALGORITHMS, cuda_codec, cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp import DecodeError, NvCompBatchCodec, NvCompBatchZarrCodec

#: The event loops the awaitables run under.
LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}


def chunks(count: int, size: int = 4096, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        np.cumsum(rng.integers(-3, 4, size=size // 4), dtype="i4").view(np.uint8)
        for _ in range(count)
    ]


class ThreadPeak:
    """The Python threads started while awaited work runs (sampled by a
    task of the loop): asyncio.to_thread would start executor threads."""

    def __init__(self) -> None:
        self.before = set(threading.enumerate())
        self.started: set[threading.Thread] = set()

    async def watch(self, work):
        pending = asyncio.ensure_future(work)
        while not pending.done():
            self.started |= set(threading.enumerate()) - self.before
            await asyncio.sleep(0.002)
        return pending.result()

    def assert_no_thread_added(self) -> None:
        names = sorted(t.name for t in self.started)
        assert len(names) <= 1, f"threads started: {names}"
        assert not [n for n in names if n.startswith("asyncio_")], names


async def zstd_array(store, data: np.ndarray):
    """A zarr array of ``data`` in ``store``, 16 x 16 chunks through the codec's zstd."""
    array = await zarr_async.create_array(
        store,
        shape=data.shape,
        chunks=(16, 16),
        dtype=data.dtype,
        compressors=NvCompBatchZarrCodec("zstd"),
    )
    await array.setitem(slice(None), data)
    return array


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_awaited_batches_equal_blocking_batches(algorithm, loop):
    codec = NvCompBatchCodec(algorithm, device="cpu")
    data = chunks(9)

    async def both():
        encoded = await codec.encode_batch_async(data)
        return encoded, await codec.decode_batch_async(encoded), await codec.decode_batch_async([])

    encoded, decoded, empty = LOOPS[loop](both())
    assert encoded == codec.encode_batch(data)
    assert empty == []
    for got, want in zip(decoded, data, strict=True):
        np.testing.assert_array_equal(got, want)


def test_awaited_batches_raise_what_blocking_batches_raise():
    codec = NvCompBatchCodec("zstd", device="cpu")
    corrupt = [codec.encode(chunks(1)[0])[:-7]]
    with pytest.raises(DecodeError) as blocking:
        codec.decode_batch(corrupt)
    with pytest.raises(DecodeError) as awaited:
        asyncio.run(codec.decode_batch_async(corrupt))
    assert str(awaited.value) == str(blocking.value)


def test_a_thousand_awaited_decodes_hold_no_python_thread_each():
    codec = NvCompBatchCodec("lz4", device="cpu")
    data = [chunks(4, seed=i) for i in range(1000)]
    encoded = [codec.encode_batch(batch) for batch in data]
    peak = ThreadPeak()

    async def decodes():
        return await asyncio.gather(*(codec.decode_batch_async(batch) for batch in encoded))

    got = asyncio.run(peak.watch(decodes()))
    for batch, want in zip(got, data, strict=True):
        for g, w in zip(batch, want, strict=True):
            np.testing.assert_array_equal(g, w)
    peak.assert_no_thread_added()


@pytest.mark.parametrize("loop", LOOPS)
def test_zarrs_async_api_through_the_zarr3_codec_starts_no_thread(loop):
    """zarr's own pipeline with the zarr 3 codec, from zarr.api.asynchronous:
    500 reads and 50 writes in flight from one loop, on a memory store
    (whose I/O needs no thread), decode and encode without a thread."""
    store = zarr.storage.MemoryStore()
    data = np.arange(128 * 64, dtype="i4").reshape(128, 64)
    rows = [random.Random(i).randrange(0, 112) for i in range(500)]
    peak = ThreadPeak()

    async def work():
        array = await zarr_async.create_array(
            store, shape=data.shape, chunks=(16, 16), dtype="i4", compressors=NvCompBatchZarrCodec()
        )
        await asyncio.gather(
            *(array.setitem((slice(r, r + 16),), data[r : r + 16]) for r in range(0, 128, 16))
        )
        writes = [
            array.setitem((slice(r, r + 1), slice(0, 5)), data[r : r + 1, :5]) for r in range(50)
        ]
        reads = [array.getitem((slice(r, r + 16),)) for r in rows]
        return (await asyncio.gather(*reads, *writes))[: len(rows)]

    with zarrs_nvcomp.set_zarr_batch_size():
        got = LOOPS[loop](peak.watch(work()))
    for r, result in zip(rows, got, strict=True):
        np.testing.assert_array_equal(result, data[r : r + 16])
    peak.assert_no_thread_added()


def test_the_pipelines_engine_path_awaits_its_decodes_and_encodes(paths):
    """The codec pipeline on a store the reader cannot open (a memory store):
    zarr's fetches, then one awaited engine call per batch, for reads and for
    writes that merge into stored chunks, without a thread."""
    store = zarr.storage.MemoryStore()
    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    peak = ThreadPeak()

    async def work():
        array = await zstd_array(store, data)
        await asyncio.gather(
            *(array.setitem((r, slice(3, 9)), data[r, 3:9]) for r in range(0, 64, 5))
        )
        return await asyncio.gather(*(array.getitem((slice(r, r + 16),)) for r in range(48)))

    with zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}):
        got = asyncio.run(peak.watch(work()))
    for r, result in enumerate(got):
        np.testing.assert_array_equal(result, data[r : r + 16])
    kinds = {kind for kind, _ in paths}
    assert {"engine", "encode"} <= kinds, paths
    peak.assert_no_thread_added()


def test_decodes_cancelled_at_random_points_leave_no_memory_behind():
    """100 awaited decodes of a 16 MiB batch, each cancelled after a random
    wait: the process's peak memory grows by at most a few batches' worth
    (a cancelled batch ends on its thread, then lets its memory go)."""
    codec = NvCompBatchCodec("lz4", device="cpu")
    data = chunks(64, size=256 << 10)
    encoded = codec.encode_batch(data)
    nbytes = sum(d.nbytes for d in data)

    async def trials() -> int:
        rng, cancelled = random.Random(5), 0
        for _ in range(100):
            task = asyncio.ensure_future(codec.decode_batch_async(encoded))
            await asyncio.sleep(rng.uniform(0, 0.01))
            task.cancel()
            try:
                got = await task
            except asyncio.CancelledError:
                cancelled += 1
                continue
            np.testing.assert_array_equal(got[-1], data[-1])
        return cancelled

    asyncio.run(trials())  # warm-up: the allocator's pools
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert asyncio.run(trials()) > 0, "no decode was cancelled before it ended"
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert grown < 4 * nbytes, f"peak memory grew {grown >> 20} MiB"
    for got, want in zip(asyncio.run(codec.decode_batch_async(encoded)), data, strict=True):
        np.testing.assert_array_equal(got, want)


def test_awaited_reads_and_writes_run_under_uvloop(tmp_path):
    url = str(tmp_path / "a.zarr")
    data = np.arange(40 * 30, dtype="i4").reshape(40, 30)
    array = zarrs_nvcomp.create_array(url, shape=data.shape, chunks=(8, 8), dtype="i4")

    async def work():
        opened = await zarrs_nvcomp.open_array_async(url)
        await opened.write_async(data)
        return await asyncio.gather(
            opened.read_async((slice(3, 30), slice(None, None, 2)), device="cpu"),
            zarrs_nvcomp.read_chunks_parallel_async(url, device="cpu"),
        )

    part, whole = uvloop.run(work())
    np.testing.assert_array_equal(part, data[3:30, ::2])
    np.testing.assert_array_equal(whole, data)
    np.testing.assert_array_equal(array.read(device="cpu"), data)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["lz4", "zstd", "cascaded"])
def test_awaited_device_batches_equal_blocking_ones(algorithm):
    """CuPy inputs: the awaited encode and decode (on the library's thread)
    give what the blocking ones give."""
    cp, codec = cuda_codec(algorithm)
    data = [cp.asarray(c) for c in chunks(33, size=64 << 10)]

    async def both():
        encoded = await codec.encode_batch_async(data)
        return encoded, await codec.decode_batch_async(encoded)

    want = [cp.asnumpy(c) for c in data]
    encoded, decoded = asyncio.run(both())
    assert [cp.asnumpy(e).tobytes() for e in encoded] == [
        cp.asnumpy(e).tobytes() for e in codec.encode_batch([cp.asarray(w) for w in want])
    ]
    for got, w in zip(decoded, want, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(got), w)


@pytest.mark.gpu
def test_zarrs_async_api_on_the_gpu_through_the_zarr3_codec():
    cp = cupy_or_skip()
    store = zarr.storage.MemoryStore()
    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)

    async def work():
        array = await zstd_array(store, data)
        return await asyncio.gather(*(array.getitem((slice(r, r + 16),)) for r in range(48)))

    with zarrs_nvcomp.set_zarr_batch_size(), zarr.config.enable_gpu():
        got = asyncio.run(work())
    for r, result in enumerate(got):
        assert isinstance(result, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(result), data[r : r + 16])
