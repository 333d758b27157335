"""CPU backend against numcodecs, single-threaded, on the same compressed bytes.

    python benches/cpu_vs_numcodecs.py                 # 256 MiB
    python benches/cpu_vs_numcodecs.py --size-mb 64    # smoke run

Data: field_f32, a float32 2-D random walk rounded to 0.01 (seeded), cut into
1 MiB chunks and encoded with numcodecs LZ4() and Zstd(level=1). Timed, on
those same buffers: (a) numcodecs (C liblz4, C libzstd) decoding chunk after
chunk on one thread, (b) NvCompBatchCodec(device="cpu").decode_batch(chunks),
(c) the same with ``out=`` preallocated NumPy buffers. Best of --repeats after
one warm-up; ratios are against (a) in the same run.
"""

from __future__ import annotations

import argparse
import os

import numcodecs
import numpy as np
from bench_data import best_of, field_f32
from zarrs_nvcomp import NvCompBatchCodec

CHUNK = 1 << 20


def measure(name: str, chunks: list[np.ndarray], repeats: int) -> None:
    ref = {"lz4": numcodecs.LZ4(), "zstd": numcodecs.Zstd(level=1)}[name]
    encoded = [ref.encode(c) for c in chunks]
    nbytes = sum(c.nbytes for c in chunks)
    ratio = nbytes / sum(len(e) for e in encoded)
    ours = NvCompBatchCodec(algorithm=name, device="cpu")
    outs = [np.empty(c.nbytes, dtype=np.uint8) for c in chunks]

    got = ours.decode_batch(encoded)
    assert all(np.array_equal(g, c) for g, c in zip(got, chunks, strict=True)), name
    ours.decode_batch(encoded, out=outs)
    assert all(np.array_equal(o, c) for o, c in zip(outs, chunks, strict=True)), name
    del got

    timings = {
        "numcodecs, 1 thread": best_of(
            lambda: [ref.decode(e) for e in encoded], repeats
        ),
        "decode_batch": best_of(lambda: ours.decode_batch(encoded), repeats),
        "decode_batch(out=)": best_of(
            lambda: ours.decode_batch(encoded, out=outs), repeats
        ),
    }
    base = timings["numcodecs, 1 thread"]
    print(f"{name} (ratio {ratio:.2f}):")
    for label, t in timings.items():
        print(f"  {label:<22} {nbytes / t / 1e9:6.2f} GB/s  {base / t:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=256, help="data size in MiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--algorithms", default="lz4,zstd")
    args = parser.parse_args()

    print(f"os.cpu_count() = {os.cpu_count()}, load average = {os.getloadavg()}")
    data = field_f32(args.size_mb << 20)
    flat = data.reshape(-1).view(np.uint8)
    chunks = [flat[i : i + CHUNK] for i in range(0, flat.size, CHUNK)]
    print(
        f"field_f32: {flat.size / 2**20:.0f} MiB in {len(chunks)} chunks of {CHUNK >> 10} KiB"
    )

    for name in args.algorithms.split(","):
        measure(name, chunks, args.repeats)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
