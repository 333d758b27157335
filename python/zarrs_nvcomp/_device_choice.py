"""Where ``device=None`` runs a batch: the CPU or the GPU, per call.

nvCOMP decodes each buffer of a batch on its own thread block, and a GPU
call has a fixed cost (launches, staging copies, the worker process that
decodes untrusted data), so a GPU call pays off only for batches with enough
buffers to fill the GPU and enough bytes to outweigh that cost. One 64 KiB
Zstandard buffer took 2.73 ms to decode on an H200 against 0.09 ms on one CPU
core; one 1 MiB LZ4 buffer 21 ms against 0.4 ms.

Device-resident inputs always stay on the GPU: copying them to the host and
back costs more than any batch saves.

The thresholds are PROVISIONAL, set from the figures above and in
``/README.md``'s performance table, until ``benches/device_choice.py`` is run
on the H200 (decode and encode, 1 to 65,536 buffers of 64 KiB and 1 MiB,
``device="cpu"`` against ``"cuda"``): replace them with its crossover points.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """The smallest host batch that goes to the GPU: both bounds must be met."""

    min_items: int
    min_bytes: int


#: Decoding: PROVISIONAL (see the module documentation).
DECODE = Thresholds(min_items=256, min_bytes=64 << 20)
#: Encoding is slower on the CPU per byte than decoding, but nvCOMP's encoders
#: are slower per buffer too: PROVISIONAL (see the module documentation).
ENCODE = Thresholds(min_items=256, min_bytes=64 << 20)


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
