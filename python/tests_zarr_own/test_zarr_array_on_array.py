"""zarr-python's own tests of ``resize`` and ``attrs`` (``tests/test_array.py``
of the installed zarr's sources), run on ``zarrs_nvcomp.Array``: the module's
``zarr`` is replaced by an adapter whose ``create``, ``create_array`` and
``open_array`` create and open the array with ``zarrs_nvcomp``, at a local
path standing for the test's store.

Run by ``scripts/zarr-pipeline-tests.sh``, which sets ``ZARR_TESTS``.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import zarrs_nvcomp

if "ZARR_TESTS" not in os.environ:
    raise RuntimeError(
        "set ZARR_TESTS to zarr's tests directory (scripts/zarr-pipeline-tests.sh does)"
    )
# zarr's tests import each other as the package `tests`.
sys.path.insert(0, str(Path(os.environ["ZARR_TESTS"]).parent))
zarr_own = importlib.import_module("tests.test_array")


class OnOurArrays:
    """zarr's create and open functions, on ``zarrs_nvcomp``: each store
    object stands for one local path."""

    def __init__(self) -> None:
        self._root = tempfile.TemporaryDirectory(prefix="zarr-own-array-")
        self._paths: dict[int, str] = {}

    def _path(self, store: Any) -> str:
        return self._paths.setdefault(id(store), f"{self._root.name}/{len(self._paths)}.zarr")

    def create(
        self,
        *,
        shape: Any,
        chunks: Any,
        dtype: Any,
        fill_value: Any = 0,
        store: Any,
        zarr_format: int = 3,
    ) -> zarrs_nvcomp.Array:
        return zarrs_nvcomp.create_array(
            self._path(store),
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=fill_value,
            zarr_format=zarr_format,
        )

    def create_array(
        self, *, store: Any, shape: Any, chunks: Any, dtype: Any, zarr_format: int = 3
    ) -> zarrs_nvcomp.Array:
        return self.create(
            shape=shape, chunks=chunks, dtype=dtype, store=store, zarr_format=zarr_format
        )

    def open_array(self, *, store: Any, zarr_format: int = 3) -> zarrs_nvcomp.Array:
        array = zarrs_nvcomp.open_array(self._path(store))
        assert array.zarr_format == zarr_format
        return array


@pytest.fixture(autouse=True)
def on_our_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zarr_own, "zarr", OnOurArrays())


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("name", ["test_resize_1d", "test_resize_2d"])
def test_zarrs_own_resize_test_passes_on_our_array(name: str, zarr_format: int) -> None:
    getattr(zarr_own, name)(object(), zarr_format)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarrs_own_attrs_test_passes_on_our_array(zarr_format: int) -> None:
    zarr_own.test_update_attrs(zarr_format)
