"""Finds nvCOMP's library in the ``nvidia-libnvcomp-cu13`` or ``-cu12`` wheel
through Python's import system, so that it is found wherever this Python runs
(a venv's python started without activation, Jupyter kernels, conda, system
pip): the Rust loader's own search only sees ``PYTHONPATH`` and ``VIRTUAL_ENV``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The file the Rust loader opens (``nvcomp_sys::LIBRARY_NAME``).
LIBRARY_NAME = "libnvcomp.so.6"


def wheel_library() -> Path | None:
    """The ``libnvcomp.so.6`` of the nvCOMP wheel importable here, or None.

    Both CUDA flavours install the package ``nvidia.libnvcomp``; its folders
    are read from the import system without importing it."""
    try:
        spec = importlib.util.find_spec("nvidia.libnvcomp")
    except (ImportError, ValueError):
        # No `nvidia` namespace package at all, or a broken one.
        return None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or ():
        for lib in ("lib64", "lib"):
            candidate = Path(folder, lib, LIBRARY_NAME)
            if candidate.is_file():
                return candidate
    return None
