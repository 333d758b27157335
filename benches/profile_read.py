"""Where the time of a read goes: reads arrays with ``ZARRS_NVCOMP_PROFILE``
set and prints the phase lines of the GPU engine's calls and of the reader's
waves (see ``src/profile.rs``) for the last of two reads of each.

    python benches/profile_read.py PATH... [--device cuda|cpu] [--trusted]

Each mark waits for the work it closes, so a profiled read is a little
slower than a timed one: this tells where the time goes, the benchmarks
(``read_bench.py``, ``untrusted_read_bench.py``, ...) how fast a read is.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

# Read once, by the library's first call: set before it.
os.environ["ZARRS_NVCOMP_PROFILE"] = "1"

import numpy as np
import zarrs_nvcomp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--trusted", action="store_true")
    args = parser.parse_args()
    for path in args.paths:
        array = zarrs_nvcomp.open_array(path)
        timings = []
        for attempt in ("warm-up", "profiled"):
            # The library's lines go to the process's stderr: mark where the
            # profiled read's start, for whoever reads the log.
            print(f"--- {attempt} read of {path}", file=sys.stderr, flush=True)
            t = time.perf_counter()
            array.read((slice(None),), device=args.device, trusted_input=args.trusted)
            timings.append(time.perf_counter() - t)
        nbytes = math.prod(array.shape) * np.dtype(array.dtype).itemsize
        print(
            f"{path}: profiled read {timings[-1] * 1e3:.1f} ms, "
            f"{nbytes / timings[-1] / 1e9:.2f} GB/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
