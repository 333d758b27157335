"""The mean of a large zstd array from local disk with Dask over one and two
GPUs (``dask_cuda.LocalCUDACluster``, one worker per GPU, or the same
layout from distributed alone where dask-cuda is not installed;
``zarrs_nvcomp.to_dask``), against one direct ``read_chunks_parallel`` of the
whole array on one GPU; same run.

    python benches/dask_multi_gpu.py [--size-gib 16] [--chunk-kib 1024] [--block-mib 1024]
                                     [--dir DIR] [--repeats 3]

The array (float32 field of 8192 columns, zstd level 1) is written once by a
chunk-parallel writer (a process pool compressing each chunk and writing its
file) into DIR, a temporary directory by default, and read from the page
cache. Dask blocks are whole stored chunks of about --block-mib (``to_dask``
with ``chunks=``; large blocks make large batches for the GPU). Each
configuration is timed after a warm-up: the median of --repeats runs of
``mean().compute()`` (the direct read: ``read_chunks_parallel(...).mean()``).
Without a GPU, runs the same on the CPU (``LocalCluster``, two workers) to
check the script. Prints a table with the ratios the issue asks about: two
GPUs against one, and one GPU through Dask against the direct read.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarrs_nvcomp
from zarrs_nvcomp._buffers import cupy_module

sys.path.insert(0, str(Path(__file__).parent))
from bench_data import bench_parser
from chunk_writer import write_field

COLUMNS = 8192


def median_time(repeats: int, fn) -> tuple[float, float]:
    """(median seconds, result) of ``fn()`` after one warm-up call."""
    result = fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), float(result)


def gpu_cluster(workers: int):
    """One Dask worker per GPU, each seeing its GPU as device 0:
    ``dask_cuda.LocalCUDACluster``, or where dask-cuda cannot be imported the
    same layout from distributed alone (a nanny per GPU with its
    ``CUDA_VISIBLE_DEVICES``); and the cluster's name."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        from distributed import Nanny, Scheduler, SpecCluster

        spec = {
            i: {
                "cls": Nanny,
                "options": {"nthreads": 2, "env": {"CUDA_VISIBLE_DEVICES": str(i)}},
            }
            for i in range(workers)
        }
        scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
        cluster = SpecCluster(workers=spec, scheduler=scheduler)
        return cluster, f"distributed.SpecCluster, a nanny per GPU (no dask_cuda: {e})"
    cluster = LocalCUDACluster(
        CUDA_VISIBLE_DEVICES=list(range(workers)),
        threads_per_worker=2,
        dashboard_address=None,
    )
    return cluster, "dask_cuda.LocalCUDACluster"


def dask_mean(
    path: Path, workers: int, gpu: bool, block: tuple[int, int], repeats: int
):
    from distributed import Client, LocalCluster

    if gpu:
        cluster, name = gpu_cluster(workers)
    else:
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, dashboard_address=None
        )
        name = "distributed.LocalCluster"
    print(f"{workers} worker(s): {name}")
    with cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        device = "cuda" if gpu else "cpu"
        x = zarrs_nvcomp.to_dask(str(path), chunks=block, device=device)
        return median_time(repeats, lambda: x.mean(dtype="f8").compute())


def main() -> None:
    parser = bench_parser(__doc__, "array is")
    parser.add_argument("--size-gib", type=float, default=16)
    parser.add_argument("--chunk-kib", type=int, default=1024)
    parser.add_argument("--block-mib", type=int, default=1024)
    args = parser.parse_args()

    cp = cupy_module()
    gpus = (
        cp.cuda.runtime.getDeviceCount()
        if cp is not None and zarrs_nvcomp.gpu_available()
        else 0
    )
    chunk_rows = max(1, args.chunk_kib * 1024 // (4 * COLUMNS))
    rows = (
        max(1, int(args.size_gib * 2**30) // (4 * COLUMNS) // chunk_rows) * chunk_rows
    )
    block_rows = (
        max(1, args.block_mib * 2**20 // (4 * COLUMNS) // chunk_rows) * chunk_rows
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp) / "dataset.zarr"
        path = root / "field"
        if not (path / "zarr.json").exists():
            start = time.perf_counter()
            stored = write_field(root, "field", (rows, COLUMNS), (chunk_rows, COLUMNS))
            print(
                f"wrote {rows * COLUMNS * 4 / 2**30:.1f} GiB in {time.perf_counter() - start:.0f} s,"
                f" {stored / 2**30:.1f} GiB stored"
            )
        array = zarrs_nvcomp.open_array(str(path))
        nbytes = array.nbytes

        rows_out: list[tuple[str, float, float]] = []
        if gpus:

            def direct():
                data = zarrs_nvcomp.read_chunks_parallel(str(path), device="cuda")
                mean = data.mean(dtype="f8")
                cp.cuda.runtime.deviceSynchronize()
                return mean

            rows_out.append(
                ("read_chunks_parallel, 1 GPU", *median_time(args.repeats, direct))
            )
            for workers in sorted({1, min(2, gpus)}):
                seconds, mean = dask_mean(
                    path, workers, True, (block_rows, COLUMNS), args.repeats
                )
                rows_out.append((f"to_dask, {workers} GPU", seconds, mean))
        else:
            print("no usable GPU and CuPy: the CPU path, to check the script")

            def direct():
                return zarrs_nvcomp.read_chunks_parallel(str(path), device="cpu").mean(
                    dtype="f8"
                )

            rows_out.append(
                ("read_chunks_parallel, CPU", *median_time(args.repeats, direct))
            )
            for workers in (1, 2):
                seconds, mean = dask_mean(
                    path, workers, False, (block_rows, COLUMNS), args.repeats
                )
                rows_out.append((f"to_dask, {workers} CPU workers", seconds, mean))

    means = [m for _, _, m in rows_out]
    if not np.allclose(means, means[0], rtol=1e-6):
        raise SystemExit(f"the means disagree: {means}")
    print(
        f"\nmean of {nbytes / 2**30:.1f} GiB float32, zstd level 1, "
        f"{chunk_rows * COLUMNS * 4 // 1024} KiB chunks, Dask blocks of "
        f"{block_rows * COLUMNS * 4 // 2**20} MiB; median of {args.repeats}"
    )
    print(f"{'method':32s} {'seconds':>8s} {'GB/s':>7s}")
    for name, seconds, _ in rows_out:
        print(f"{name:32s} {seconds:8.3f} {nbytes / seconds / 1e9:7.2f}")
    direct_s, one_s = rows_out[0][1], rows_out[1][1]
    print(
        f"one worker through Dask / direct read: {direct_s / one_s:.2f}x (target >= 0.8)"
    )
    if len(rows_out) > 2:
        print(
            f"two workers / one worker:              {one_s / rows_out[2][1]:.2f}x (target >= 1.8)"
        )


if __name__ == "__main__":
    main()
