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

import time
from pathlib import Path

import zarr
import zarr.codecs
import zarrs_nvcomp
from bench_data import data_dir, field_f32
from read_bench import gpu_destination, read_parser, run_local, write_array

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
        compressors = zarr.codecs.BloscCodec(
            cname=cname, clevel=clevel, shuffle="shuffle", typesize=4
        )
        chunks = (CHUNK_BYTES // (4 * COLUMNS), COLUMNS)
        ratio = write_array(path, data, chunks=chunks, compressors=compressors)
        print(f"wrote {path.name}: ratio {ratio:.2f}")
    return paths


def batched_note(path: Path) -> str:
    """The path this reader takes through the array at ``path``."""
    batched = zarrs_nvcomp.open_array(str(path)).batched_algorithm
    return f"  (ours: {f'batched {batched}' if batched else 'zarrs pipeline'})"


def main() -> None:
    args = read_parser(__doc__).parse_args()
    gpu = gpu_destination(args.cpu)
    with data_dir(args.dir, "zarrs-nvcomp-blosc-bench-") as root:
        paths = write_arrays(root, args.size_mb)
        run_local(paths, args.repeats, gpu, label_width=22, note=batched_note)


if __name__ == "__main__":
    main()
