"""Awaited reads against one blocking read of the same bytes: ``--reads``
concurrent ``Array.read_async`` calls of one slab each (default 64 of
16 MiB) against one ``Array.read`` of the whole array (default 1 GiB), the
same array in the same run, turns alternating. Prints GB/s of each and the
ratio awaited / blocking (target: 0.9 or more).

    python benches/async_reads.py [--size-mb 1024] [--reads 64] [--device cuda|cpu]
                                  [--repeats 3] [--dir DIR]

The array: float32 field data, zstd level 1, 1 MiB chunks (256 x 1024),
written once by the library's writer into DIR (a temporary directory by
default); reads go to ``--device`` (default: the GPU when one is usable),
with the default options (untrusted input). Times are the best of
--repeats after a warm-up.
"""

from __future__ import annotations

import asyncio

import zarrs_nvcomp
from bench_data import bench_parser, best_of, data_dir, field_f32

COLUMNS = 1024
CHUNK_ROWS = 256


def main() -> None:
    parser = bench_parser(__doc__, "array is", repeats=3)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--reads", type=int, default=64)
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None)
    args = parser.parse_args()
    device = args.device or (
        "cuda" if zarrs_nvcomp.gpu_unavailable_reason(0) is None else "cpu"
    )
    rows = args.size_mb * (1 << 20) // (4 * COLUMNS)
    if rows % (args.reads * CHUNK_ROWS):
        parser.error("--size-mb must split into --reads slabs of whole chunks")
    slab = rows // args.reads
    nbytes = rows * COLUMNS * 4
    sync = _device_sync(device)
    with data_dir(args.dir, "async-reads-") as root:
        url = str(root / f"field-{args.size_mb}.zarr")
        if not (root / f"field-{args.size_mb}.zarr" / "zarr.json").exists():
            data = field_f32(nbytes).reshape(rows, COLUMNS)
            array = zarrs_nvcomp.create_array(
                url,
                shape=data.shape,
                chunks=(CHUNK_ROWS, COLUMNS),
                dtype="f4",
                compressors={
                    "name": "zstd",
                    "configuration": {"level": 1, "checksum": False},
                },
            )
            array[...] = data
            del data
        array = zarrs_nvcomp.open_array(url)

        def blocking() -> None:
            array.read(device=device)

        async def awaited() -> None:
            await asyncio.gather(
                *(
                    array.read_async((slice(i * slab, (i + 1) * slab),), device=device)
                    for i in range(args.reads)
                )
            )

        times = {"blocking": [], "awaited": []}
        for _ in range(args.repeats):
            times["blocking"].append(best_of(blocking, 1, sync))
            times["awaited"].append(best_of(lambda: asyncio.run(awaited()), 1, sync))
    print(
        f"device {device}, {nbytes >> 20} MiB, {args.reads} awaited reads of {slab * COLUMNS * 4 >> 20} MiB"
    )
    best = {name: min(t) for name, t in times.items()}
    for name, seconds in best.items():
        print(f"  {name:9s} {nbytes / seconds / 1e9:7.2f} GB/s  ({seconds:.3f} s)")
    print(f"  awaited / blocking: {best['blocking'] / best['awaited']:.2f}x")


def _device_sync(device: str):
    if device != "cuda":
        return lambda: None
    import cupy as cp

    return cp.cuda.Device().synchronize


if __name__ == "__main__":
    main()
