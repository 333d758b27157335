"""Where ``device=None`` runs a batch: the CPU or the GPU, per call.

nvCOMP decodes each buffer of a batch on its own thread block, and a GPU
call has a fixed cost (launches, staging copies, the worker process that
decodes untrusted data), so a GPU call pays off only for batches with enough
buffers to fill the GPU and enough bytes to outweigh that cost. One 64 KiB
Zstandard buffer took 2.73 ms to decode on an H200 against 0.09 ms on one CPU
core; one 1 MiB LZ4 buffer 21 ms against 0.4 ms.

Device-resident inputs always stay on the GPU: copying them to the host and
back costs more than any batch saves.

The thresholds come from ``benches/device_choice.py`` on an H200 (16 CPU
cores, nvCOMP 6.0, host buffers of float32 field data, batches up to 4 GiB).
On 2026-11-30 the GPU first beat the CPU at 1,024 buffers of 64 KiB (64 MiB)
for Zstandard decode (9.9 against 10.7 ms) and encode, and for LZ4 encode;
with 1 MiB buffers the 16 cores were faster up to 256 buffers (Zstandard
decode 36 against 55 ms), and LZ4 decode stayed faster on the CPU at every
measured size (up to 2x faster than the GPU above the shared threshold), so
host LZ4 batches always decode on the CPU (`decode_thresholds`).

A decode's bytes are its inputs', compressed: the re-run of 2026-12-03 found
1,024 Zstandard buffers of 64 KiB (about 28 MiB compressed, at this data's
ratio of 2.3) decoded on the CPU in 17.5 ms where the GPU took 10.9,
because they fell short of a 64 MiB bound meant for decoded bytes. The
decode bound is therefore 16 MiB of input, which such a batch passes with
a compression ratio of up to 4. The run's only other batch more than 1.2x
slower than the faster device (64 LZ4 buffers of 64 KiB, 1.23x) ran on the
CPU, as the CPU's own column did: timing noise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """The smallest host batch that goes to the GPU: both bounds must be met."""

    min_items: int
    min_bytes: int


#: Decoding: 1,024 buffers and 16 MiB of compressed input (see the module
#: documentation).
DECODE = Thresholds(min_items=1024, min_bytes=16 << 20)
#: Encoding: the same crossover was measured (see the module documentation).
ENCODE = Thresholds(min_items=1024, min_bytes=64 << 20)
#: Thresholds no host batch meets.
NEVER = Thresholds(min_items=sys.maxsize, min_bytes=sys.maxsize)
#: Algorithms whose host batches decode faster on the CPU at every measured
#: size: LZ4 (see the module documentation).
CPU_DECODERS = frozenset({"lz4"})


def decode_thresholds(algorithm: str) -> Thresholds:
    """The decode thresholds of ``algorithm``: `NEVER` where the CPU
    always won, else `DECODE`."""
    return NEVER if algorithm in CPU_DECODERS else DECODE


def use_gpu(
    *, on_device: bool, items: int, nbytes: int, thresholds: Thresholds, gpu_usable: bool
) -> bool:
    """Whether a ``device=None`` batch of ``items`` buffers of ``nbytes`` bytes
    in all (the inputs') runs on the GPU."""
    if not gpu_usable:
        return False
    if on_device:
        return True
    return items >= thresholds.min_items and nbytes >= thresholds.min_bytes
