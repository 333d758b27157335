"""Awaitable reads: `Array.read_async`, `open_array_async` and
`read_chunks_parallel_async` return what the blocking reads return and raise
what they raise; a thousand reads wait on a slow server from one event loop
without a thread each; a cancelled read stops its requests and gives its
memory back."""

from __future__ import annotations

import asyncio
import random
import resource
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import (
    DecodeError,
    SelectionError,
    open_array,
    open_array_async,
    read_chunks_parallel,
    read_chunks_parallel_async,
)

#: An HTTP server of the directory argv[1] on a free port (printed), that
#: waits argv[2] seconds before each answer, and never answers requests of
#: chunks of arrays named ``stall*``: it holds them until the client closes
#: their connections, and ``/_stalled`` says how many it holds. One asyncio
#: loop: no thread per request.
SERVER = r"""
import asyncio, sys
from pathlib import Path

root, delay = Path(sys.argv[1]), float(sys.argv[2])
stalled = 0

async def serve(reader, writer):
    global stalled
    try:
        while head := await reader.readuntil(b"\r\n\r\n"):
            method, target, _ = head.decode("latin-1").split("\r\n")[0].split(" ", 2)
            path = root / target.lstrip("/")
            if target.startswith("/stall") and "/c/" in target:
                # Held until the client closes the connection.
                stalled += 1
                await reader.read(1)
                stalled -= 1
                return
            await asyncio.sleep(delay)
            if target == "/_stalled":
                body, status = str(stalled).encode(), "200 OK"
            else:
                body = path.read_bytes() if path.is_file() else b""
                status = "200 OK" if path.is_file() else "404 Not Found"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            if method != "HEAD":
                writer.write(body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


@pytest.fixture
def served(tmp_path):
    """Arrays in a directory behind a server that adds 50 ms to every
    request: yields (directory, base URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(tmp_path), "0.05"], stdout=subprocess.PIPE, text=True
    )
    port = int(proc.stdout.readline())
    yield tmp_path, f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def write(path: Path, shape=(40, 30), chunks=(8, 8), dtype="i4") -> np.ndarray:
    data = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    z = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype)
    z[...] = data
    return data


@pytest.mark.parametrize(
    "selection",
    [(), (slice(3, 17), slice(None, None, 3)), (slice(None, None, -2), 5), (slice(4, 4),), 7],
)
def test_awaited_reads_equal_blocking_reads(tmp_path, selection):
    write(tmp_path / "a.zarr")
    url = str(tmp_path / "a.zarr")
    array = open_array(url)

    async def reads():
        opened = await open_array_async(url)
        return (
            await array.read_async(selection, device="cpu"),
            await opened.read_async(selection, device="cpu"),
            await read_chunks_parallel_async(url, selection, device="cpu"),
        )

    expected = array.read(selection, device="cpu")
    for got in asyncio.run(reads()):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_awaited_reads_raise_what_blocking_reads_raise(tmp_path):
    write(tmp_path / "a.zarr")
    url = str(tmp_path / "a.zarr")
    chunk = tmp_path / "a.zarr" / "c" / "1" / "2"
    chunk.write_bytes(b"not a chunk" * 10)
    with pytest.raises(DecodeError, match="c/1/2") as blocking:
        read_chunks_parallel(url, device="cpu")
    with pytest.raises(DecodeError, match="c/1/2") as awaited:
        asyncio.run(read_chunks_parallel_async(url, device="cpu"))
    assert str(awaited.value) == str(blocking.value)
    with pytest.raises(SelectionError):
        asyncio.run(open_array(url).read_async((99,), device="cpu"))
    with pytest.raises(FileNotFoundError):
        asyncio.run(open_array_async(str(tmp_path / "missing.zarr")))


def test_a_thousand_reads_in_flight_hold_no_thread_each(served):
    root, base = served
    data = write(root / "a.zarr", shape=(64, 64), chunks=(16, 16))
    array = open_array(f"{base}/a.zarr", {"allow_http": "true"})
    rows = [random.Random(i).randrange(0, 48) for i in range(1000)]
    peak = threading.active_count()

    async def count_threads(stop: asyncio.Event) -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, threading.active_count())
            await asyncio.sleep(0.005)

    async def reads():
        stop = asyncio.Event()
        counter = asyncio.create_task(count_threads(stop))
        start = time.monotonic()
        got = await asyncio.gather(
            *(array.read_async((slice(r, r + 16),), device="cpu") for r in rows)
        )
        took = time.monotonic() - start
        stop.set()
        await counter
        return got, took

    before = threading.active_count()
    got, took = asyncio.run(reads())
    for r, result in zip(rows, got, strict=True):
        np.testing.assert_array_equal(result, data[r : r + 16])
    # No Python thread per read (asyncio.to_thread would start up to 32).
    assert peak <= before + 1, (before, peak)
    # 1,000 reads of 8 chunks at 50 ms a request: together, not one by one.
    assert took < 20, took


def test_cancelling_an_awaited_read_stops_it(served):
    root, base = served
    write(root / "stall.zarr", shape=(64, 64), chunks=(16, 16))
    array = open_array(f"{base}/stall.zarr", {"allow_http": "true"})

    def stalled() -> int:
        with urllib.request.urlopen(f"{base}/_stalled") as answer:
            return int(answer.read())

    async def cancelled_read() -> float:
        task = asyncio.create_task(array.read_async(device="cpu"))
        await asyncio.sleep(0.3)
        assert not task.done(), "the chunks' requests never end"
        assert stalled() == 16, "every chunk is asked for"
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The read is dropped: its requests' connections close.
        while stalled() and time.monotonic() - start < 5:
            await asyncio.sleep(0.02)
        return time.monotonic() - start

    assert asyncio.run(cancelled_read()) < 1.0
    assert stalled() == 0


def cancelled_reads(array, data: np.ndarray, device: str) -> None:
    """100 reads of ``array`` to ``device``, each cancelled after a random
    wait; those that end first equal ``data``."""

    async def trials() -> None:
        rng = random.Random(7)
        for _ in range(100):
            task = asyncio.create_task(array.read_async(device=device))
            await asyncio.sleep(rng.uniform(0, 0.02))
            task.cancel()
            try:
                got = await task
            except asyncio.CancelledError:
                continue
            np.testing.assert_array_equal(got if device == "cpu" else got.get(), data)

    asyncio.run(trials())


def test_reads_cancelled_at_random_points_leave_no_memory_behind(tmp_path):
    """100 reads of a 16 MiB array, each cancelled after a random wait:
    the process's peak memory grows by at most a few reads' worth."""
    data = write(tmp_path / "big.zarr", shape=(1024, 4096), chunks=(64, 1024), dtype="f4")
    array = open_array(str(tmp_path / "big.zarr"))
    cancelled_reads(array, data, "cpu")  # warm-up: the allocator's pools
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cancelled_reads(array, data, "cpu")
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert grown < 4 * data.nbytes, f"peak memory grew {grown >> 20} MiB"
    # The reader still reads.
    np.testing.assert_array_equal(asyncio.run(array.read_async(device="cpu")), data)


@pytest.mark.gpu
def test_device_reads_cancelled_at_random_points_give_the_gpu_memory_back(tmp_path):
    """The same on the GPU: after 100 cancelled reads into device memory,
    the GPU's used memory is back where a first 100 left it."""
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    data = write(tmp_path / "big.zarr", shape=(1024, 4096), chunks=(64, 1024), dtype="f4")
    array = open_array(str(tmp_path / "big.zarr"))

    def used() -> int:
        cp.get_default_memory_pool().free_all_blocks()
        cp.cuda.Device().synchronize()
        free, total = cp.cuda.runtime.memGetInfo()
        return total - free

    cancelled_reads(array, data, "cuda")  # warm-up: the engine's buffers
    baseline = used()
    cancelled_reads(array, data, "cuda")
    grown = used() - baseline
    assert grown < data.nbytes, f"GPU memory in use grew {grown >> 20} MiB"
    np.testing.assert_array_equal(asyncio.run(array.read_async(device="cuda")).get(), data)


def test_the_package_exports_the_awaitable_reads():
    for name in ("open_array_async", "read_chunks_parallel_async"):
        assert name in zarrs_nvcomp.__all__
        assert asyncio.iscoroutinefunction(getattr(zarrs_nvcomp, name))


# --- writes -------------------------------------------------------------------


def test_awaited_writes_equal_blocking_writes(tmp_path):
    data = np.arange(40 * 30, dtype="i4").reshape(40, 30)
    for name in ("blocking", "awaited", "by_url"):
        zarrs_nvcomp.create_array(str(tmp_path / name), shape=(40, 30), chunks=(8, 8), dtype="i4")
    rows = (slice(3, 20),)
    blocking = zarrs_nvcomp.write_chunks_parallel(str(tmp_path / "blocking"), data[3:20], rows)

    async def writes():
        array = await open_array_async(str(tmp_path / "awaited"))
        return (
            await array.write_async(data[3:20], (slice(3, 20),)),
            await zarrs_nvcomp.write_chunks_parallel_async(
                str(tmp_path / "by_url"), data[3:20], (slice(3, 20),)
            ),
        )

    assert asyncio.run(writes()) == (blocking, blocking)
    expected = read_chunks_parallel(str(tmp_path / "blocking"), device="cpu")
    for name in ("awaited", "by_url"):
        got = read_chunks_parallel(str(tmp_path / name), device="cpu")
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(SelectionError):
        asyncio.run(open_array(str(tmp_path / "awaited")).write_async(data, (slice(0, 40, 2),)))


def test_writes_cancelled_at_random_points_leave_each_chunk_whole(tmp_path):
    """100 writes of a new value over the last, each cancelled after a
    random wait: every chunk reads whole, as one of the values written (a
    put or file write already under way when the write is cancelled may
    land after it, as a PUT in flight may on S3)."""
    shape, chunks = (512, 512), (32, 64)
    url = str(tmp_path / "a.zarr")
    array = zarrs_nvcomp.create_array(url, shape=shape, chunks=chunks, dtype="f4")
    rng = random.Random(3)

    def value(trial: int) -> np.ndarray:
        return np.full(shape, trial, dtype="f4") + np.arange(shape[1], dtype="f4")

    async def trials() -> int:
        cancelled = 0
        array[...] = value(0)
        for trial in range(1, 101):
            task = asyncio.create_task(array.write_async(value(trial)))
            await asyncio.sleep(rng.uniform(0, 0.01))
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
            got = await array.read_async(device="cpu")
            for r in range(0, shape[0], chunks[0]):
                for c in range(0, shape[1], chunks[1]):
                    block = got[r : r + chunks[0], c : c + chunks[1]]
                    written = block[0, 0] - c
                    assert written == int(written) and 0 <= written <= trial, (trial, written)
                    expected = value(int(written))[r : r + chunks[0], c : c + chunks[1]]
                    np.testing.assert_array_equal(block, expected)
        return cancelled

    assert asyncio.run(trials()) > 0, "no write was cancelled before it ended"


def test_reads_from_several_loops_on_several_threads_at_once(tmp_path):
    """Four threads, each running its own event loop, await reads of one
    opened array at once: every result equals the blocking read."""
    data = write(tmp_path / "a.zarr", shape=(64, 64), chunks=(8, 8))
    array = open_array(str(tmp_path / "a.zarr"))
    results: dict[int, list[np.ndarray]] = {}

    async def reads(n: int) -> list[np.ndarray]:
        return await asyncio.gather(
            *(array.read_async((slice(r, r + 8 + n),), device="cpu") for r in range(0, 48, 4))
        )

    def run(n: int) -> None:
        results[n] = asyncio.run(reads(n))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [0, 1, 2, 3]
    for n, got in results.items():
        for r, result in zip(range(0, 48, 4), got, strict=True):
            np.testing.assert_array_equal(result, data[r : r + 8 + n])


def test_a_read_awaited_in_a_forked_child_runs_on_the_childs_runner(tmp_path):
    """The parent's runner has no thread in a forked child: the child's
    awaited read runs on a runner of its own."""
    import multiprocessing

    data = write(tmp_path / "a.zarr")
    array = open_array(str(tmp_path / "a.zarr"))
    np.testing.assert_array_equal(asyncio.run(array.read_async(device="cpu")), data)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_awaited_read, (str(tmp_path / "a.zarr"),)).get(60)
    np.testing.assert_array_equal(got, data)


def _awaited_read(url: str) -> np.ndarray:
    return asyncio.run(read_chunks_parallel_async(url, device="cpu"))


def test_a_thousand_reads_through_zarrs_async_api_hold_no_thread_each(tmp_path, paths):
    """zarr.api.asynchronous with the codec pipeline: a thousand reads of a
    local array in flight from one event loop are the reader's awaited reads,
    without a Python thread more; each equals the data."""
    import zarr.api.asynchronous as zarr_async

    data = write(tmp_path / "a.zarr", shape=(64, 64), chunks=(16, 16))
    rows = [random.Random(i).randrange(0, 48) for i in range(1000)]
    counts = {}

    async def reads():
        array = await zarr_async.open_array(store=str(tmp_path / "a.zarr"), mode="r")
        # Once opened (zarr's local store reads its metadata on threads of
        # the loop's executor), the reads start no thread of their own.
        await array.getitem((slice(0, 16),))
        counts["before"] = counts["peak"] = threading.active_count()
        pending = [asyncio.ensure_future(array.getitem((slice(r, r + 16),))) for r in rows]
        while not all(p.done() for p in pending):
            counts["peak"] = max(counts["peak"], threading.active_count())
            await asyncio.sleep(0.002)
        return [p.result() for p in pending]

    with zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}):
        got = asyncio.run(reads())
    for r, result in zip(rows, got, strict=True):
        np.testing.assert_array_equal(result, data[r : r + 16])
    assert sum(1 for kind, _ in paths if kind == "reader") == len(rows) + 1
    assert counts["peak"] <= counts["before"] + 1, counts


@pytest.mark.parametrize(
    "selection", [(slice(3, 30), slice(None, None, 2)), (slice(None, None, -3),)]
)
def test_awaited_reads_into_out_as_blocking_reads(tmp_path, selection):
    write(tmp_path / "a.zarr")
    array = open_array(str(tmp_path / "a.zarr"))
    expected = array.read(selection, device="cpu")
    out = np.full(expected.shape, -7, dtype=expected.dtype)
    got = asyncio.run(array.read_async(selection, device="cpu", out=out))
    assert got is out
    np.testing.assert_array_equal(out, expected)
    wrong = np.empty((1, 1), dtype=expected.dtype)
    with pytest.raises(ValueError, match="shape"):
        asyncio.run(array.read_async(selection, out=wrong))
