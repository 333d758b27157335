"""Spots two CuPy builds installed side by side (``cupy-cuda12x`` from
``zarr[gpu]`` next to ``cupy-cuda13x`` from ``zarrs-nvcomp[cu13]``, say):
they install the same ``cupy`` package, so the files of one overwrite the
other's and imports fail or mix CUDA versions."""

from __future__ import annotations

import importlib.metadata
import re
import warnings
from collections.abc import Iterable

# `cupy` itself (built from source) and the wheels `cupy-cuda12x`, `cupy-rocm-6-0`, ...
_CUPY_DISTRIBUTION = re.compile(r"cupy([-_.].*)?", re.IGNORECASE)


def cupy_builds(names: Iterable[str]) -> list[str]:
    """The CuPy distributions among the installed distribution ``names``,
    normalised and sorted."""
    found = {
        re.sub(r"[-_.]+", "-", name).lower() for name in names if _CUPY_DISTRIBUTION.fullmatch(name)
    }
    return sorted(found)


def warn_if_several() -> None:
    """Warns when more than one CuPy build is installed."""
    names = (d.metadata["Name"] or "" for d in importlib.metadata.distributions())
    builds = cupy_builds(names)
    if len(builds) > 1:
        warnings.warn(
            f"zarrs_nvcomp: several CuPy builds are installed ({', '.join(builds)}); they "
            "overwrite each other's files. Keep the one matching the driver: uninstall the "
            'others and reinstall it (zarr[gpu] pulls cupy-cuda12x, as does "zarrs-nvcomp[cu12]")',
            stacklevel=3,
        )
