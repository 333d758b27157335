"""Where a read through ``NvcompCodecPipeline`` spends the time that
``read_chunks_parallel`` does not: each step of the pipeline's read timed
alone on the same array, in one run.

    python benches/pipeline_parts.py [--size-mb 256] [--chain plain] [--repeats 7] [--profile]

Steps: the reader as users call it (open and read, its own output); an
array opened once and read into its own output, and into a lent output
(CuPy, or NumPy without a GPU); zarr's open of the array with the
pipeline; zarr's read of an array opened once; and zarr's whole
``zarr.open_array(path)[...]``. Times are medians after a warm-up.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
import zarrs_nvcomp
from pipeline_read import CHAINS, PIPELINE, timed, write
from zarrs_nvcomp._buffers import cupy_module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--chain", choices=list(CHAINS), default="plain")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print the phases of z[...] on the opened array and cProfile's top functions",
    )
    args = parser.parse_args()
    gpu = zarrs_nvcomp.gpu_unavailable_reason() is None
    cp = cupy_module() if gpu else None
    device = "cuda" if gpu else "cpu"
    path = Path(tempfile.mkdtemp(prefix="pipeline_parts_")) / f"{args.chain}.zarr"
    data = write(path, args.chain, args.size_mb)

    def synced(result=None):
        if cp is not None:
            cp.cuda.Device().synchronize()
        return result

    opened = zarrs_nvcomp.open_array(str(path))
    lent = cp.empty(data.shape, data.dtype) if cp is not None else np.empty_like(data)
    with (
        zarr.config.set(PIPELINE),
        zarr.config.enable_gpu() if gpu else zarr.config.set({}),
    ):
        z = zarr.open_array(path, mode="r")

    def zarr_read_opened():
        with (
            zarr.config.set(PIPELINE),
            zarr.config.enable_gpu() if gpu else zarr.config.set({}),
        ):
            return synced(z[...])

    def zarr_open_and_read():
        with (
            zarr.config.set(PIPELINE),
            zarr.config.enable_gpu() if gpu else zarr.config.set({}),
        ):
            return synced(zarr.open_array(path, mode="r")[...])

    def zarr_open():
        with (
            zarr.config.set(PIPELINE),
            zarr.config.enable_gpu() if gpu else zarr.config.set({}),
        ):
            return zarr.open_array(path, mode="r")

    steps = {
        "read_chunks_parallel(path)": lambda: synced(
            zarrs_nvcomp.read_chunks_parallel(str(path), device=device)
        ),
        "opened.read()": lambda: synced(opened.read(device=device)),
        "opened.read(out=lent)": lambda: synced(opened.read(device=device, out=lent)),
        "output allocation (lent)": lambda: synced(
            cp.empty(data.shape, data.dtype) if cp is not None else np.empty_like(data)
        ),
        "zarr.open_array(path)": zarr_open,
        "z[...] (opened once)": zarr_read_opened,
        "zarr.open_array(path)[...]": zarr_open_and_read,
    }
    print(
        f"{args.size_mb} MiB {args.chain} on the {'GPU' if gpu else 'CPU'}; median of {args.repeats}"
    )
    gb = data.nbytes / 1e9
    for name, step in steps.items():
        seconds = timed(step, args.repeats)
        print(f"{name:<30}{seconds * 1e3:>9.2f} ms{gb / seconds:>9.2f} GB/s")
    if args.profile:
        print_phases(z, gpu, synced, args.repeats)
        print_profile(z, gpu)


def print_phases(z, gpu: bool, synced, repeats: int) -> None:
    """The medians of the phases of ``z[...]``: zarr's work before the
    pipeline is called (indexing, one item per chunk), the pipeline's before
    the reader reads (its request, the thread hop, the kept open), the
    reader's read, the hop back, and zarr's work after."""
    from zarrs_nvcomp import NvcompCodecPipeline

    marks: dict[str, float] = {}
    read, read_with_reader = (
        NvcompCodecPipeline.read,
        NvcompCodecPipeline._read_with_reader,
    )

    async def timed_read(self, *args, **kwargs):
        marks["pipeline called"] = time.perf_counter()
        try:
            return await read(self, *args, **kwargs)
        finally:
            marks["pipeline returned"] = time.perf_counter()

    def timed_read_with_reader(self, *args, **kwargs):
        marks["reader thread"] = time.perf_counter()
        try:
            return read_with_reader(self, *args, **kwargs)
        finally:
            marks["reader read"] = time.perf_counter()

    NvcompCodecPipeline.read = timed_read
    NvcompCodecPipeline._read_with_reader = timed_read_with_reader
    rows: list[list[float]] = []
    try:
        with (
            zarr.config.set(PIPELINE),
            zarr.config.enable_gpu() if gpu else zarr.config.set({}),
        ):
            for _ in range(repeats + 1):
                start = time.perf_counter()
                synced(z[...])
                end = time.perf_counter()
                points = [start, *(marks[k] for k in MARKS), end]
                rows.append([b - a for a, b in itertools.pairwise(points)])
    finally:
        NvcompCodecPipeline.read = read
        NvcompCodecPipeline._read_with_reader = read_with_reader
    names = [
        "zarr before the pipeline",
        "pipeline before the reader",
        "the reader's read",
        "back in the pipeline",
        "zarr after the pipeline",
    ]
    for name, times in zip(names, zip(*rows[1:], strict=True), strict=True):
        print(f"  {name:<28}{statistics.median(times) * 1e3:>9.2f} ms")


#: The marks of ``print_phases``, in the order they are made.
MARKS = ["pipeline called", "reader thread", "reader read", "pipeline returned"]


def print_profile(z, gpu: bool) -> None:
    """cProfile's top functions (own time) of ``z[...]``, profiled on zarr's
    event-loop thread, where the pipeline's Python runs."""
    from zarr.core.sync import sync

    profiler = cProfile.Profile()

    async def profiled():
        profiler.enable()
        try:
            return await z._async_array.getitem(...)
        finally:
            profiler.disable()

    with (
        zarr.config.set(PIPELINE),
        zarr.config.enable_gpu() if gpu else zarr.config.set({}),
    ):
        sync(profiled())
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
