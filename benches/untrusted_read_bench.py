"""GPU reads of untrusted data (decoded in the worker process, the default)
against trusted data (decoded in this process), on the same arrays, the modes
taking turns.

    python benches/untrusted_read_bench.py [--size-mb 1024] [--dir DIR] [--repeats 3]
        [--modes untrusted,trusted] [--codec zstd|gzip] [--label NAME]

Arrays: zstd level 1 (or gzip level 1: untrusted raw DEFLATE streams are also
inflated whole on the host before the GPU decodes them),
float32 random-walk field rounded to 0.01, 1 MiB and 64 KiB chunks, written
once with zarr-python and kept in DIR. Timings are the
best of --repeats after a warm-up read (which also starts the worker), GB/s of
decoded data into GPU memory. A build without ``trusted_input`` (before the
worker existed) is measured with ``--modes plain``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs
import zarrs_nvcomp

COLUMNS = 2048


def field(rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((rows, COLUMNS), dtype=np.float32) * 0.1
    np.cumsum(steps, axis=0, out=steps)
    return np.round(steps, 2)


COMPRESSORS = {
    "zstd": zarr.codecs.ZstdCodec(level=1),
    "gzip": zarr.codecs.GzipCodec(level=1),
}


def ensure_array(path: Path, rows: int, chunk_rows: int, codec: str) -> None:
    if (path / "zarr.json").exists():
        return
    arr = zarr.create_array(
        str(path),
        shape=(rows, COLUMNS),
        chunks=(chunk_rows, COLUMNS),
        dtype="f4",
        compressors=COMPRESSORS[codec],
    )
    step = max(chunk_rows, 16384)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        arr[start:stop] = field(stop - start, start)


def read(path: Path, mode: str):
    if mode == "plain":
        return zarrs_nvcomp.read_chunks_parallel(str(path), device="cuda")
    return zarrs_nvcomp.read_chunks_parallel(
        str(path), device="cuda", trusted_input=mode == "trusted"
    )


def main() -> None:
    import cupy as cp

    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--dir", default="/tmp/untrusted-bench")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="untrusted,trusted")
    parser.add_argument("--codec", default="zstd", choices=sorted(COMPRESSORS))
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    rows = args.size_mb * (1 << 20) // (4 * COLUMNS)
    arrays = {"1 MiB": 128, "64 KiB": 8}
    results = {}
    modes = args.modes.split(",")
    for name, chunk_rows in arrays.items():
        # zstd arrays keep the names earlier runs gave them.
        prefix = "f32" if args.codec == "zstd" else f"f32-{args.codec}"
        path = Path(args.dir) / f"{prefix}-{chunk_rows}.zarr"
        t0 = time.time()
        ensure_array(path, rows, chunk_rows, args.codec)
        print(f"{name}: array ready in {time.time() - t0:.1f} s", flush=True)
        nbytes = rows * COLUMNS * 4
        reference = None
        best = dict.fromkeys(modes, float("inf"))
        for _ in range(args.repeats + 1):
            for mode in modes:
                cp.cuda.runtime.deviceSynchronize()
                t = time.perf_counter()
                out = read(path, mode)
                cp.cuda.runtime.deviceSynchronize()
                best[mode] = min(best[mode], time.perf_counter() - t)
                if reference is None:
                    reference = out
                elif not bool(cp.array_equal(reference, out)):
                    raise SystemExit(f"{mode} read differs")
                del out
        results[name] = {m: nbytes / best[m] / 1e9 for m in modes}
        row = ", ".join(f"{m} {v:.2f} GB/s" for m, v in results[name].items())
        print(f"{args.label} {name}: {row}", flush=True)
    if os.environ.get("OUT"):
        out = Path(os.environ["OUT"]) / f"untrusted_read_{args.label or 'run'}.json"
        out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
