"""device=None against device="cpu" and "cuda": decode and encode of host batches.

    python benches/device_choice.py                    # the H200 run (about 2-3 minutes)
    python benches/device_choice.py --max-mb 64        # CPU-only smoke run

Data: field_f32 (float32 random walk rounded to 0.01), cut into 64 KiB and
1 MiB buffers; batches of 1, 4, 16, ..., 65,536 buffers (as many as fit in
--max-mb). Timed: one encode_batch / decode_batch call of NumPy buffers with
codecs made for "cpu", "cuda" and None, best of a few runs. Prints the table,
the crossover (the smallest batch at which "cuda" beats "cpu") per algorithm,
operation and buffer size, and every batch where device=None is more than
1.2x slower than the faster of the two. zarrs_nvcomp._device_choice's
thresholds are to be set from the crossovers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import zarrs_nvcomp
from bench_data import field_f32
from zarrs_nvcomp import NvCompBatchCodec, _device_choice

BUFFER_SIZES = {"64KiB": 64 << 10, "1MiB": 1 << 20}
BATCHES = [4**k for k in range(9)]  # 1 .. 65,536


def timed(fn: Callable[[], Any], budget: float) -> float:
    """Best time of ``fn`` after a warm-up, repeated while within ``budget`` seconds."""
    fn()
    best, spent, runs = float("inf"), 0.0, 0
    while runs < 2 or (spent < budget and runs < 20):
        t0 = time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        best, spent, runs = min(best, took), spent + took, runs + 1
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-mb", type=int, default=4096, help="largest batch, MiB")
    parser.add_argument("--algorithms", default="lz4,zstd")
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per point")
    args = parser.parse_args()

    reason = zarrs_nvcomp.gpu_unavailable_reason()
    devices = ["cpu", None] if reason else ["cpu", "cuda", None]
    if reason:
        print(
            f"no GPU ({reason}): device=None runs on the CPU; timing cpu and None only"
        )
    print(
        f"thresholds: decode {_device_choice.DECODE} (LZ4: CPU always), encode {_device_choice.ENCODE}"
    )
    data = field_f32(args.max_mb << 20).reshape(-1).view(np.uint8)

    rows = []  # (algorithm, op, buffer, count, {device: seconds}, None's backend)
    for algorithm in args.algorithms.split(","):
        codecs = {
            d: NvCompBatchCodec(algorithm, device=d, trusted_input=True)
            for d in devices
        }
        for size_name, size in BUFFER_SIZES.items():
            counts = [n for n in BATCHES if n * size <= data.nbytes]
            items = [data[i * size : (i + 1) * size] for i in range(counts[-1])]
            encoded = codecs[devices[-2]].encode_batch(items)
            for op in ("decode", "encode"):
                for n in counts:
                    batch = encoded[:n] if op == "decode" else items[:n]
                    times = {}
                    for device, codec in codecs.items():
                        call = (
                            codec.decode_batch if op == "decode" else codec.encode_batch
                        )
                        times[device] = timed(lambda c=call, b=batch: c(b), args.budget)
                    ran = codecs[None].last_backend
                    rows.append((algorithm, op, size_name, n, times, ran))
                    print(
                        f"{algorithm:5} {op:6} {size_name:5} x{n:<6} "
                        + " ".join(
                            f"{d or 'None'}={t * 1e3:9.3f} ms" for d, t in times.items()
                        )
                        + f"  None ran on {ran}",
                        flush=True,
                    )

    print("\ncrossovers (smallest batch where cuda beats cpu):")
    for key in dict.fromkeys((r[0], r[1], r[2]) for r in rows):
        series = [r for r in rows if (r[0], r[1], r[2]) == key]
        faster = [r[3] for r in series if "cuda" in r[4] and r[4]["cuda"] < r[4]["cpu"]]
        nbytes = BUFFER_SIZES[key[2]]
        where = (
            f"{faster[0]} buffers ({faster[0] * nbytes >> 20} MiB)"
            if faster
            else "none"
        )
        print(f"  {' '.join(key)}: {where}")

    print("\ndevice=None more than 1.2x slower than the faster of cpu and cuda:")
    slow = [
        (r, r[4][None] / min(t for d, t in r[4].items() if d is not None))
        for r in rows
        if r[4][None] > 1.2 * min(t for d, t in r[4].items() if d is not None)
    ]
    for r, ratio in slow:
        print(f"  {r[0]} {r[1]} {r[2]} x{r[3]}: {ratio:.2f}x (ran on {r[5]})")
    if not slow:
        print("  none")


if __name__ == "__main__":
    main()
