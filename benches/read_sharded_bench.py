"""Reads sharded zarr arrays (zstd level 1, 64 KiB inner chunks, 4 MiB and
64 MiB shards) from local disk with zarrs_nvcomp and with zarrs-python.

    python benches/read_sharded_bench.py [--size-mb 1024] [--dir DIR] [--repeats 3] [--cpu]

The data is ``bench_data.field_f32`` (a float32 field rounded to 0.01),
written once with zarr-python (through zarrs-python's pipeline when it is
installed, which is faster) and kept in DIR. With a usable GPU and CuPy the
destination is GPU memory: this reader on the GPU against zarrs-python then
``cupy.asarray``; the host path is also run against zarrs-python to host
memory. Timings are the best of --repeats after one warm-up read, the
methods taking turns (``read_bench.interleaved_best_of``); the files are in
the page cache by then. Rates are GB/s of decoded data. A 1/16 band of rows
is timed too (the bytes it fetches are counted by the Rust test
``tests/reader_sharded.rs``, which asserts at most 1.2x the inner chunks).
"""

from __future__ import annotations

import time
from pathlib import Path

import zarr
import zarr.codecs
import zarrs_nvcomp
from bench_data import data_dir, field_f32
from read_bench import (
    gpu_destination,
    interleaved_best_of,
    read_parser,
    write_array,
    zarrs_python_available,
)
from zarrs_nvcomp._buffers import cupy_module

COLUMNS = 4096  # field_f32's width
INNER_ROWS = (1 << 16) // (4 * COLUMNS)  # 64 KiB inner chunks of whole rows
SHARDS = {"4MiB": 4 << 20, "64MiB": 64 << 20}
ZARRS = "zarrs.ZarrsCodecPipeline"


def write_arrays(root: Path, size_mb: int) -> dict[str, Path]:
    paths, data = {}, None
    for name, shard_bytes in SHARDS.items():
        path = root / f"field-f32-shards-{name}-{size_mb}mb.zarr"
        paths[f"shards {name}"] = path
        if (path / "zarr.json").exists():
            continue
        if data is None:
            data = field_f32(size_mb << 20)
        shard_rows = max(INNER_ROWS, shard_bytes // (4 * COLUMNS))
        pipeline = {"codec_pipeline.path": ZARRS} if zarrs_python_available() else {}
        t0 = time.perf_counter()
        with zarr.config.set(pipeline):
            ratio = write_array(
                path,
                data,
                shards=(shard_rows, COLUMNS),
                chunks=(INNER_ROWS, COLUMNS),
                compressors=zarr.codecs.ZstdCodec(level=1),
            )
        print(
            f"wrote {path.name} in {time.perf_counter() - t0:.1f} s: shards of "
            f"{shard_rows} rows, ratio {ratio:.2f}"
        )
    return paths


def methods(path: Path, gpu: bool, rows: slice) -> dict[str, object]:
    array = zarrs_nvcomp.open_array(str(path))
    out: dict[str, object] = {}
    zarrs_read = None
    if zarrs_python_available():
        with zarr.config.set({"codec_pipeline.path": ZARRS}):
            z = zarr.open_array(str(path), mode="r")
        zarrs_read = lambda: z[rows]
    if gpu:
        cp = cupy_module()

        def sync(x):
            cp.cuda.runtime.deviceSynchronize()
            return x

        out["ours gpu"] = lambda: sync(array.read((rows,), device="cuda"))
        if zarrs_read:
            out["zarrs-python+copy"] = lambda: sync(cp.asarray(zarrs_read()))
    out["ours cpu"] = lambda: array.read((rows,), device="cpu")
    if zarrs_read:
        out["zarrs-python"] = zarrs_read
    return out


def run(paths: dict[str, Path], repeats: int, gpu: bool) -> None:
    print(
        f"\nlocal disk -> {'GPU and host' if gpu else 'host'} memory; GB/s, best of {repeats}"
    )
    if not zarrs_python_available():
        print("(zarrs-python not installed: pip install zarrs)")
    pairs = [("ours gpu", "zarrs-python+copy"), ("ours cpu", "zarrs-python")]
    for label, path in paths.items():
        rows_total = zarr.open_array(str(path), mode="r").shape[0]
        for part, rows in [("all", slice(None)), ("1/16", slice(0, rows_total // 16))]:
            nbytes = len(range(rows_total)[rows]) * COLUMNS * 4
            times = interleaved_best_of(repeats, methods(path, gpu, rows))
            row = "  ".join(f"{n} {nbytes / t / 1e9:6.2f}" for n, t in times.items())
            ratios = "  ".join(
                f"{ours}/{ref} {times[ref] / times[ours]:.2f}x"
                for ours, ref in pairs
                if ours in times and ref in times
            )
            print(f"{label:13s} {part:5s} {row}  {ratios}")


def main() -> None:
    args = read_parser(__doc__).parse_args()
    gpu = gpu_destination(args.cpu)
    with data_dir(args.dir, "zarrs-nvcomp-shards-") as root:
        run(write_arrays(root, args.size_mb), args.repeats, gpu)


if __name__ == "__main__":
    main()
