"""The warning given once per process when a read ran on the CPU where the
GPU was asked for or expected, at the line of the user's code that read."""

from __future__ import annotations

import os
import sys
import warnings

from zarrs_nvcomp._buffers import cupy_module
from zarrs_nvcomp._zarrs_nvcomp import gpu_unavailable_reason

__all__ = ["CpuPathWarning", "warn_cpu_path"]

#: What the GPU extras need: nvCOMP's CUDA 13 build a driver of 580 or newer, its CUDA 12 one 525.
INSTALL_HINT = (
    'pip install "zarrs-nvcomp[cu13]" (NVIDIA driver 580 or newer), or [cu12] (driver 525 or newer)'
)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_warned = False


class CpuPathWarning(UserWarning):
    """A read ran on the CPU where the GPU was asked for or expected: a
    ``device="cuda"`` read of a chain that only the zarrs pipeline decodes, or
    a ``device=None`` read with CuPy installed while the GPU is unusable.
    Given once per process, at the line that read; ``device="cpu"`` reads
    never warn."""


def warn_cpu_path(url: str, requested: str | None, device: str, fallback: str | None) -> None:
    """Warns, once per process, when the read of ``url`` that just succeeded
    on ``device`` (resolved from ``requested``) ran on the CPU where the GPU
    was asked for or expected (``fallback``: why zarrs' pipeline decoded it)."""
    global _warned
    if _warned:
        return
    why = _reason(requested, device, fallback)
    if why is None:
        return
    _warned = True
    warnings.warn(f"zarrs_nvcomp: {url}: {why}", CpuPathWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The stacklevel of the first frame outside this package (warnings.warn's
    ``skip_file_prefixes`` is Python 3.12's)."""
    # Level 1 is the function that calls warnings.warn: this one's caller.
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE_DIR:
        frame, level = frame.f_back, level + 1
    return level


def _reason(requested: str | None, device: str, fallback: str | None) -> str | None:
    if device.startswith("cuda") and fallback is not None:
        return f"decoded on the CPU through the zarrs pipeline, then copied to the GPU: {fallback}"
    if requested is not None or device != "cpu":
        return None
    # device=None ran on the CPU: a fallback where one of the GPU's two
    # needs (CuPy, a usable GPU) is met, and a plain CPU machine otherwise.
    gpu_reason = gpu_unavailable_reason(0)
    has_cupy = cupy_module() is not None
    if has_cupy == (gpu_reason is None):
        return None
    if not has_cupy:
        gpu_reason = f"CuPy is not installed ({INSTALL_HINT})"
    # The engine's reason ends with advice for an error; the warning's own
    # sentence gives it once.
    gpu_reason = gpu_reason.removesuffix(', or use device="cpu"')
    return (
        f"read on the CPU, not the GPU, because {gpu_reason}; "
        'pass device="cpu" to read on the CPU without this warning'
    )
