"""zarr-python's own tests of orthogonal, coordinate and mask selections
(``tests/test_indexing.py`` of the installed zarr's sources), run on
``zarrs_nvcomp.Array``: each builds its array through
``zarr_array_from_numpy_array``, which here creates it with
``zarrs_nvcomp.create_array`` and hands the test an adapter that reads
through ``oindex`` and ``vindex``.

Run by ``scripts/zarr-pipeline-tests.sh``, which fetches zarr's sources and
sets ``ZARR_TESTS`` to their ``tests`` directory.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarrs_nvcomp

if "ZARR_TESTS" not in os.environ:
    raise RuntimeError(
        "set ZARR_TESTS to zarr's tests directory (scripts/zarr-pipeline-tests.sh does)"
    )
_SOURCE = Path(os.environ["ZARR_TESTS"]) / "test_indexing.py"
_spec = importlib.util.spec_from_file_location("zarr_own_test_indexing", _SOURCE)
assert _spec is not None and _spec.loader is not None
zarr_own = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zarr_own)


class OurArray:
    """The reading part of zarr's ``Array`` API, on ``zarrs_nvcomp.Array``."""

    def __init__(self, array: zarrs_nvcomp.Array) -> None:
        self.array = array
        self.oindex = array.oindex
        self.vindex = array.vindex
        self.shape = array.shape

    def __getitem__(self, selection: Any) -> Any:
        return self.array[selection]

    def get_orthogonal_selection(self, selection: Any) -> Any:
        return self.array.oindex[selection]

    def get_coordinate_selection(self, selection: Any) -> Any:
        return self.array.vindex[selection]

    def get_mask_selection(self, selection: Any) -> Any:
        return self.array.vindex[selection]


_made = tempfile.TemporaryDirectory(prefix="zarr-own-indexing-")


def _ours_from_numpy(
    store: Any, a: np.ndarray, chunk_shape: tuple[int, ...] | None = None
) -> OurArray:
    path = Path(_made.name) / f"{len(os.listdir(_made.name))}.zarr"
    array = zarrs_nvcomp.create_array(
        str(path), data=a, chunks=chunk_shape or a.shape, fill_value=0
    )
    return OurArray(array)


zarr_own.zarr_array_from_numpy_array = _ours_from_numpy


def _ascending(selections: list[Any]) -> list[Any]:
    """``selections`` without slices of negative step: zarr refuses them,
    ``zarrs_nvcomp`` reads them reversed, as NumPy does (its one deviation
    from these tests, on purpose)."""
    return [s for s in selections if not (isinstance(s, slice) and (s.step or 1) < 0)]


zarr_own.basic_selections_1d_bad = _ascending(zarr_own.basic_selections_1d_bad)
zarr_own.basic_selections_2d_bad = [
    s
    for s in zarr_own.basic_selections_2d_bad
    if not any(
        isinstance(a, slice) and (a.step or 1) < 0 for a in (s if isinstance(s, tuple) else (s,))
    )
]

TESTS = [
    "test_get_orthogonal_selection_1d_bool",
    "test_get_orthogonal_selection_1d_int",
    "test_get_orthogonal_selection_2d",
    "test_get_orthogonal_selection_3d",
    "test_get_coordinate_selection_1d",
    "test_get_coordinate_selection_2d",
    "test_get_mask_selection_1d",
    "test_get_mask_selection_2d",
]


@pytest.mark.parametrize("name", TESTS)
def test_zarrs_own_selection_test_passes_on_our_array(name: str) -> None:
    getattr(zarr_own, name)(None)
