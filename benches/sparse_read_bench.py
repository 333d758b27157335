"""Fill-only reads of sparse local arrays: arrays of one-element chunks of
which a handful are written, read whole; time per chunk of the array.

    python benches/sparse_read_bench.py [--chunks 1000000,10000000]
        [--peer-chunks 100000] [--dir DIR] [--repeats 3] [--label NAME]

Layouts: v3 one-dimensional (every chunk file in ``c/``), v3 two-dimensional
(a directory per row of chunks, most of them absent), v2 one-dimensional
(every chunk file beside ``.zarray``). Readers: ``read_chunks_parallel`` on
the CPU and ``open_array(path)[:]``; zarr-python reads the arrays of
``--peer-chunks`` chunks (it takes tens of microseconds a chunk), in the
same run. Times are the best of ``--repeats`` after a warm-up read. To
compare two builds, run each with ``--label`` (for instance one installed
with ``pip install --target`` and put first on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
import zarrs_nvcomp


def make(path: Path, layout: str, n: int) -> None:
    if path.exists():
        return
    if layout == "v3-2d":
        side = math.isqrt(n)
        shape, chunks = (side, side), (1, 1)
    else:
        shape, chunks = (n,), (1,)
    z = zarr.create_array(
        str(path),
        shape=shape,
        chunks=chunks,
        dtype="float32",
        fill_value=7,
        zarr_format=2 if layout == "v2-1d" else 3,
    )
    # A handful of chunks written, at both ends.
    z[(slice(0, 5),) * len(shape)] = 1
    z[(slice(shape[0] - 3, shape[0]),) * len(shape)] = 2


def best(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", default="1000000,10000000")
    parser.add_argument("--peer-chunks", type=int, default=100_000)
    parser.add_argument(
        "--dir", default=os.path.join(tempfile.gettempdir(), "sparse_read_bench")
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    counts = [int(c) for c in args.chunks.split(",")]
    rows = []
    for layout in ["v3-1d", "v3-2d", "v2-1d"]:
        for n in sorted({*counts, args.peer_chunks}):
            path = root / f"{layout}-{n}.zarr"
            make(path, layout, n)
            chunks = math.prod(zarr.open_array(str(path)).cdata_shape)
            readers = {}
            if n in counts:
                readers["read_chunks_parallel"] = lambda p=str(path): (
                    zarrs_nvcomp.read_chunks_parallel(p, device="cpu")
                )
                readers["open_array[:]"] = lambda p=str(path): zarrs_nvcomp.open_array(
                    p
                )[:]
            if n == args.peer_chunks:
                readers["zarr-python"] = lambda p=str(path): zarr.open_array(p)[:]
            for reader, fn in readers.items():
                out = fn()
                # open_array's default output is on the GPU where there is one.
                out = out.get() if hasattr(out, "get") else np.asarray(out)
                # The fill everywhere but the handful of written chunks.
                assert out.size == chunks and np.count_nonzero(out != 7) <= 50, reader
                seconds = best(fn, args.repeats)
                rows.append(
                    {
                        "label": args.label,
                        "layout": layout,
                        "chunks": chunks,
                        "reader": reader,
                        "seconds": round(seconds, 3),
                        "us_per_chunk": round(seconds / chunks * 1e6, 3),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    print(
        "\n| label | layout | chunks | reader | s | µs/chunk |\n|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['label']} | {r['layout']} | {r['chunks']:,} | {r['reader']} | {r['seconds']} | {r['us_per_chunk']} |"
        )


if __name__ == "__main__":
    main()
