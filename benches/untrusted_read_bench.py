"""GPU reads of untrusted data (decoded in the worker process, the default)
against trusted data (decoded in this process), on the same arrays, the modes
taking turns.

    python benches/untrusted_read_bench.py [--size-mb 1024] [--dir DIR] [--repeats 3]
        [--modes untrusted,trusted] [--codec zstd,gzip,...] [--data field,counts]
        [--label NAME]

Arrays: each codec of ``--codec`` (level 1: zstd, gzip, zlib, blosc-zstd and
blosc-lz4 with byte shuffle) on each kind of ``--data``: ``field``, a float32
random-walk field rounded to 0.01 (zstd ratio about 1.2), and ``counts``,
microscopy-like uint16 photon counts (about 2.6), in 1 MiB and 64 KiB
chunks, written once with zarr-python and kept in DIR. Timings are the best
of --repeats after a warm-up read (which also starts the worker), GB/s of
decoded data into GPU memory, and the ratio untrusted / trusted. A build
without ``trusted_input`` (before the worker existed) is measured with
``--modes plain``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs
import zarrs_nvcomp

COLUMNS = 2048


def field(rows: int, columns: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((rows, columns), dtype=np.float32) * 0.1
    np.cumsum(steps, axis=0, out=steps)
    return np.round(steps, 2)


#: The counts of a block of rows, made once: Poisson draws are slow, and
#: chunks are compressed one by one, so blocks may repeat each other.
_COUNTS: dict[tuple[int, int], np.ndarray] = {}


def counts(rows: int, columns: int, seed: int) -> np.ndarray:
    """Photon counts of a dim, smoothly lit sample: Poisson around a
    background of 12 with brighter blobs (zstd level 1: ratio about 2.6)."""
    block = _COUNTS.get((rows, columns))
    if block is None:
        rng = np.random.default_rng(rows)
        y = np.arange(rows, dtype=np.float32)[:, None]
        x = np.arange(columns, dtype=np.float32)[None, :]
        light = 12 + 9 * (1 + np.sin(y / 37) * np.cos(x / 53))
        block = _COUNTS[(rows, columns)] = rng.poisson(light).astype(np.uint16)
    return np.roll(block, seed % rows, axis=0)


#: Each kind of data: its maker and its dtype.
DATA = {"field": (field, "f4"), "counts": (counts, "u2")}

COMPRESSORS = {
    "zstd": zarr.codecs.ZstdCodec(level=1),
    "gzip": zarr.codecs.GzipCodec(level=1),
    "zlib": zarr.codecs.numcodecs.Zlib(level=1),
    "blosc-zstd": zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"),
    "blosc-lz4": zarr.codecs.BloscCodec(cname="lz4", clevel=1, shuffle="shuffle"),
}


def ensure_array(
    path: Path, nbytes: int, chunk_bytes: int, codec: str, data: str
) -> None:
    if (path / "zarr.json").exists():
        return
    make, dtype = DATA[data]
    columns = COLUMNS * 4 // np.dtype(dtype).itemsize
    rows, chunk_rows = nbytes // (4 * COLUMNS), chunk_bytes // (4 * COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # numcodecs.zlib is outside the v3 specification
        arr = zarr.create_array(
            str(path),
            shape=(rows, columns),
            chunks=(chunk_rows, columns),
            dtype=dtype,
            compressors=COMPRESSORS[codec],
        )
    step = max(chunk_rows, 16384)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        arr[start:stop] = make(stop - start, columns, start)


def read(path: Path, mode: str):
    if mode == "plain":
        return zarrs_nvcomp.read_chunks_parallel(str(path), device="cuda")
    return zarrs_nvcomp.read_chunks_parallel(
        str(path), device="cuda", trusted_input=mode == "trusted"
    )


def timed(path: Path, modes: list[str], repeats: int) -> dict[str, float]:
    """The best time of each mode, the modes taking turns; every read equal."""
    import cupy as cp

    reference = None
    best = dict.fromkeys(modes, float("inf"))
    for _ in range(repeats + 1):
        for mode in modes:
            cp.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            out = read(path, mode)
            cp.cuda.runtime.deviceSynchronize()
            best[mode] = min(best[mode], time.perf_counter() - t)
            if reference is None:
                reference = out
            elif not bool(cp.array_equal(reference, out)):
                raise SystemExit(f"{path.name}: the {mode} read differs")
            del out
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--dir", default="/tmp/untrusted-bench")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="untrusted,trusted")
    parser.add_argument("--codec", default="zstd", help=f"of {', '.join(COMPRESSORS)}")
    parser.add_argument("--data", default="field", help=f"of {', '.join(DATA)}")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    nbytes = args.size_mb << 20
    chunks = {"1 MiB": 1 << 20, "64 KiB": 64 << 10}
    modes = args.modes.split(",")
    results = {}
    print(
        f"{'array':<28}"
        + "".join(f"{m + ' GB/s':>18}" for m in modes)
        + f"{'ratio':>8}"
    )
    for data in args.data.split(","):
        for codec in args.codec.split(","):
            for name, chunk_bytes in chunks.items():
                # The zstd field arrays keep the names earlier runs gave them.
                prefix = "f32" if codec == "zstd" else f"f32-{codec}"
                prefix = prefix if data == "field" else f"{data}-{codec}"
                path = Path(args.dir) / f"{prefix}-{chunk_bytes // (4 * COLUMNS)}.zarr"
                ensure_array(path, nbytes, chunk_bytes, codec, data)
                best = timed(path, modes, args.repeats)
                rates = {m: nbytes / best[m] / 1e9 for m in modes}
                label = f"{data} {codec} {name}"
                results[label] = rates
                ratio = rates[modes[0]] / rates[modes[-1]]
                row = "".join(f"{rates[m]:>18.2f}" for m in modes)
                print(f"{label:<28}{row}{ratio:>8.2f}", flush=True)
    if os.environ.get("OUT"):
        out = Path(os.environ["OUT"]) / f"untrusted_read_{args.label or 'run'}.json"
        out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
