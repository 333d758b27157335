"""Reads blosc-compressed zarr arrays from local disk with
zarrs_nvcomp.read_chunks_parallel and with zarrs-python (and zarr-python).

    python benches/read_blosc_bench.py [--size-mb 1024] [--dir DIR] [--repeats 3] [--cpu]

Arrays (written once with zarr-python and kept in DIR): a float32
random-walk field rounded to 0.01 (``bench_data.field_f32``), 1 MiB chunks,
as zarr v3 arrays with the ``blosc`` codec: lz4 with byte shuffle at level 5,
and zstd with byte shuffle at level 1.

With a usable GPU and CuPy the destination is GPU memory (this reader on the
GPU; this reader's CPU path, zarrs-python and zarr-python each followed by one
``cupy.asarray``), otherwise host memory (this reader's CPU path,
zarrs-python, zarr-python); see ``read_bench.py``, whose methods and timing
this bench shares. Each row ends with this reader's speed over
zarrs-python's and the path this reader took (batched, or zarrs' pipeline
for chains it does not batch). Timings are the best of --repeats after one warm-up read, the
methods taking turns. zarrs-python is optional (``pip install zarrs``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import zarr
import zarr.codecs
import zarrs_nvcomp
from bench_data import field_f32
from read_bench import interleaved_best_of, methods, zarrs_python_available
from zarrs_nvcomp.reader import cupy_module

CHUNK_BYTES = 1 << 20
COLUMNS = 4096  # field_f32's row length
CODECS = {
    "blosc-lz4 shuffle 5": ("lz4", 5),
    "blosc-zstd shuffle 1": ("zstd", 1),
}


def write_arrays(root: Path, size_mb: int) -> dict[str, Path]:
    paths = {}
    data = None
    for label, (cname, clevel) in CODECS.items():
        path = root / f"field-{cname}{clevel}-shuffle-{size_mb}mb.zarr"
        paths[label] = path
        if (path / "zarr.json").exists():
            continue
        if data is None:
            t0 = time.perf_counter()
            data = field_f32(size_mb << 20)
            print(f"generated {data.shape} in {time.perf_counter() - t0:.1f} s")
        z = zarr.create_array(
            str(path),
            shape=data.shape,
            chunks=(CHUNK_BYTES // (4 * COLUMNS), COLUMNS),
            dtype=data.dtype,
            compressors=zarr.codecs.BloscCodec(
                cname=cname, clevel=clevel, shuffle="shuffle", typesize=4
            ),
            overwrite=True,
        )
        z[...] = data
        stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"wrote {path.name}: ratio {data.nbytes / stored:.2f}")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size-mb", type=int, default=1024, help="decoded size of each array"
    )
    parser.add_argument(
        "--dir", type=Path, help="where the arrays are written (kept, reused)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--cpu", action="store_true", help="host memory even with a GPU"
    )
    args = parser.parse_args()
    gpu = (
        not args.cpu
        and cupy_module() is not None
        and zarrs_nvcomp.gpu_unavailable_reason(0) is None
    )
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="zarrs-nvcomp-blosc-bench-") as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        paths = write_arrays(root, args.size_mb)
        dest = "GPU memory" if gpu else "host memory"
        print(f"\nlocal disk -> {dest}; GB/s of decoded data, best of {args.repeats}")
        if not zarrs_python_available():
            print("(zarrs-python not installed: pip install zarrs)")
        ours, ref = (
            ("ours gpu", "zarrs-python+copy") if gpu else ("ours cpu", "zarrs-python")
        )
        for label, path in paths.items():
            batched = zarrs_nvcomp.open_array(str(path)).batched_algorithm
            nbytes = zarr.open_array(str(path), mode="r").nbytes
            times = interleaved_best_of(args.repeats, methods(path, gpu))
            row = "  ".join(f"{n} {nbytes / t / 1e9:6.2f}" for n, t in times.items())
            ratio = (
                f"  ours/zarrs-python {times[ref] / times[ours]:.2f}x"
                if ref in times
                else ""
            )
            how = f"batched {batched}" if batched else "zarrs pipeline"
            print(f"{label:22s} {row}{ratio}  (ours: {how})")


if __name__ == "__main__":
    main()
