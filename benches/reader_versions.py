"""The reader's rate on the same arrays with two builds of the package, so
that a change's read figures are compared with those before it on one card
in one run: the arrays are written once (``--write``), then each build
reads them in a process of its own (``--read``, the build first on
``PYTHONPATH``), the builds taking turns.

    python benches/reader_versions.py --dir DIR --write [--size-mb 1024]
    PYTHONPATH=BEFORE python benches/reader_versions.py --dir DIR --read
    python benches/reader_versions.py --dir DIR --read

Arrays (a float32 field, ``bench_data.field_f32``): zstd level 1 in 1 MiB
and in 64 KiB chunks; zstd in 64 KiB inner chunks of 4 MiB shards;
blosc-lz4 and blosc-zstd with byte shuffle in 1 MiB chunks. A read is
``read_chunks_parallel`` of the whole array into GPU memory where there is
a GPU, host memory otherwise; the best of ``--repeats`` after a warm-up.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs as zc
from bench_data import best_of, field_f32

COLUMNS = 4096
ZSTD = [zc.ZstdCodec(level=1)]

#: Each array: its chunk rows (of 4,096 float32 columns), shard rows, and
#: compressors.
ARRAYS = {
    "zstd 1 MiB": (64, None, ZSTD),
    "zstd 64 KiB": (4, None, ZSTD),
    "sharded zstd 64 KiB in 4 MiB": (4, 256, ZSTD),
    "blosc-lz4 1 MiB": (
        64,
        None,
        [zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")],
    ),
    "blosc-zstd 1 MiB": (
        64,
        None,
        [zc.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")],
    ),
}


def path_of(root: Path, name: str) -> Path:
    return root / (name.replace(" ", "-") + ".zarr")


def write(root: Path, size_mb: int) -> None:
    data = field_f32(size_mb << 20)
    for name, (chunk_rows, shard_rows, compressors) in ARRAYS.items():
        start = time.perf_counter()
        z = zarr.create_array(
            path_of(root, name),
            shape=data.shape,
            chunks=(chunk_rows, COLUMNS),
            shards=None if shard_rows is None else (shard_rows, COLUMNS),
            dtype=data.dtype,
            compressors=compressors,
            overwrite=True,
        )
        z[...] = data
        print(f"wrote {name} in {time.perf_counter() - start:.1f} s")


def read(root: Path, repeats: int) -> None:
    import zarrs_nvcomp
    from zarrs_nvcomp._buffers import cupy_module

    gpu = zarrs_nvcomp.gpu_unavailable_reason() is None
    cp = cupy_module() if gpu else None

    def sync() -> None:
        if cp is not None:
            cp.cuda.Device().synchronize()

    print(
        f"zarrs_nvcomp from {Path(zarrs_nvcomp.__file__).parent}, {'GPU' if gpu else 'CPU'}"
    )
    for name in ARRAYS:
        path = str(path_of(root, name))
        array = zarrs_nvcomp.open_array(path)
        nbytes = int(np.prod(array.shape)) * array.dtype.itemsize
        seconds = best_of(
            lambda path=path: zarrs_nvcomp.read_chunks_parallel(
                path, device="cuda" if gpu else "cpu"
            ),
            repeats,
            sync,
        )
        print(f"{name:<32}{nbytes / seconds / 1e9:>8.2f} GB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--read", action="store_true")
    args = parser.parse_args()
    if args.write:
        args.dir.mkdir(parents=True, exist_ok=True)
        write(args.dir, args.size_mb)
    if args.read:
        read(args.dir, args.repeats)


if __name__ == "__main__":
    main()
