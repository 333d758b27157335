"""Loading a zstd variable with ``xr.open_zarr(...).load()``: this project's
codec pipeline against zarrs-python's pipeline, and against reading the same
array with ``read_chunks_parallel``; same run, methods taking turns.

    python benches/xarray_bench.py [--size-mb 1024] [--chunk-kib 1024] [--dir DIR] [--repeats 5]

With a usable GPU and CuPy, the destination is GPU memory:

- ``pipeline``: ``NvcompCodecPipeline`` under ``zarr.config.enable_gpu()``
  (decoded on the GPU into a CuPy array);
- ``zarrs-python+copy``: ``zarrs.ZarrsCodecPipeline`` (CPU), then
  ``cupy.asarray`` of the variable;
- ``read_chunks_parallel``: the reader, ``device="cuda"``.

Without one, host memory: the pipeline on the CPU, zarrs-python, the reader
on the CPU and zarr-python's default pipeline. Every xarray method opens the
dataset with ``chunks=None`` (no Dask: one zarr read per variable) inside the
timing; the reader opens the array inside it too. Times are the median of
--repeats after a warm-up; GB/s of decoded data. The variable (float32 field
of 2048 columns, chunks of --chunk-kib rows, zstd level 1) is written once
by a chunk-parallel writer into DIR (a temporary directory by default).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import xarray as xr
import zarr
import zarrs_nvcomp
from zarrs_nvcomp._buffers import cupy_module

sys.path.insert(0, str(Path(__file__).parent))
from bench_data import bench_parser
from chunk_writer import write_field

COLUMNS = 2048
PIPELINE = "zarrs_nvcomp.NvcompCodecPipeline"
ZARRS_PIPELINE = "zarrs.ZarrsCodecPipeline"


def zarrs_python_available() -> bool:
    try:
        import zarrs  # noqa: F401
    except ImportError:
        return False
    return True


def load(root: Path, pipeline: str | None, gpu: bool):
    """``xr.open_zarr(root).load()`` of the field with ``pipeline`` (zarr's
    default when None), GPU buffers when ``gpu``."""
    settings = {"codec_pipeline.path": pipeline} if pipeline else {}
    with zarr.config.set(settings):
        ds = xr.open_zarr(root, chunks=None, consolidated=False)
        if gpu:
            with zarr.config.enable_gpu():
                return ds.load()["field"].data
        return ds.load()["field"].data


def methods(root: Path, gpu: bool) -> dict[str, object]:
    cp = cupy_module() if gpu else None
    field = str(root / "field")

    def sync(x):
        if cp is not None:
            cp.cuda.runtime.deviceSynchronize()
        return x

    out: dict[str, object] = {}
    if gpu:
        out["pipeline"] = lambda: sync(load(root, PIPELINE, True))
        if zarrs_python_available():
            out["zarrs-python+copy"] = lambda: sync(
                cp.asarray(load(root, ZARRS_PIPELINE, False))
            )
        out["read_chunks_parallel"] = lambda: sync(
            zarrs_nvcomp.read_chunks_parallel(field, device="cuda")
        )
    else:
        out["pipeline"] = lambda: load(root, PIPELINE, False)
        if zarrs_python_available():
            out["zarrs-python"] = lambda: load(root, ZARRS_PIPELINE, False)
        out["read_chunks_parallel"] = lambda: zarrs_nvcomp.read_chunks_parallel(
            field, device="cpu"
        )
        out["zarr-python"] = lambda: load(root, None, False)
    return out


def median_times(repeats: int, fns: dict[str, object]) -> dict[str, float]:
    """Median time of each function, the functions taking turns (after one
    warm-up call each), so that a changing load affects them alike."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def check(root: Path, gpu: bool) -> None:
    """The pipeline's result equals zarr's default pipeline's."""
    import numpy as np

    ours = load(root, PIPELINE, gpu)
    ours = ours.get() if hasattr(ours, "get") else ours
    np.testing.assert_array_equal(ours, load(root, None, False))


def main() -> None:
    parser = bench_parser(__doc__, "dataset is", repeats=5)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--chunk-kib", type=int, default=1024)
    args = parser.parse_args()

    gpu = cupy_module() is not None and zarrs_nvcomp.gpu_available()
    chunk_rows = max(1, args.chunk_kib * 1024 // (4 * COLUMNS))
    rows = max(1, args.size_mb * (1 << 20) // (4 * COLUMNS) // chunk_rows) * chunk_rows
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp) / "dataset.zarr"
        if not (root / "field" / "zarr.json").exists():
            start = time.perf_counter()
            stored = write_field(root, "field", (rows, COLUMNS), (chunk_rows, COLUMNS))
            print(
                f"wrote {rows * COLUMNS * 4 / 2**30:.2f} GiB in {time.perf_counter() - start:.1f} s,"
                f" ratio {rows * COLUMNS * 4 / stored:.2f}"
            )
        nbytes = zarr.open_array(root / "field", mode="r").nbytes
        check(root, gpu)
        times = median_times(args.repeats, methods(root, gpu))

    dest = "GPU memory" if gpu else "host memory"
    print(
        f"\nxr.open_zarr(...).load() of {nbytes / 2**30:.2f} GiB float32, zstd level 1, "
        f"{chunk_rows * COLUMNS * 4 // 1024} KiB chunks -> {dest}; median of {args.repeats}"
    )
    print(f"{'method':24s} {'seconds':>8s} {'GB/s':>7s} {'pipeline is':>12s}")
    for name, seconds in times.items():
        ratio = seconds / times["pipeline"]
        print(f"{name:24s} {seconds:8.3f} {nbytes / seconds / 1e9:7.2f} {ratio:11.2f}x")
    if gpu:
        print("targets: pipeline >= 3x zarrs-python+copy, >= 0.8x read_chunks_parallel")


if __name__ == "__main__":
    main()
