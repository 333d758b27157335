"""The package's errors that mirror zarr's are zarr's too, where zarr is
installed: ``except zarr.errors.X`` catches what the same call raises in
zarr, and the package imports without zarr."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import zarrs_nvcomp

zarr = pytest.importorskip("zarr")
errors = pytest.importorskip("zarr.errors")


def _group(path) -> None:
    zarr.open_group(str(path), mode="w").create_array("inner", shape=(4,), dtype="i4")


def test_a_missing_local_array_is_zarrs_array_not_found(tmp_path):
    with pytest.raises(errors.ArrayNotFoundError) as caught:
        zarrs_nvcomp.open_array(tmp_path / "missing.zarr")
    assert isinstance(caught.value, zarrs_nvcomp.ArrayNotFoundError)
    assert isinstance(caught.value, zarrs_nvcomp.StoreError)
    assert isinstance(caught.value, FileNotFoundError)
    # The package's message and OSError fields, not zarr's template.
    assert caught.value.filename == str(tmp_path / "missing.zarr")
    assert "nothing at this path" in str(caught.value)


def test_a_store_without_metadata_is_zarrs_array_not_found(tmp_path):
    # The reader decides (a memory store, and a local directory that exists
    # but holds no metadata document).
    (tmp_path / "empty.zarr").mkdir()
    for url in ["memory://no-array-here", str(tmp_path / "empty.zarr")]:
        with pytest.raises(errors.ArrayNotFoundError) as caught:
            zarrs_nvcomp.open_array(url)
        assert isinstance(caught.value, zarrs_nvcomp.ArrayNotFoundError), url
        assert "metadata is missing" in str(caught.value), url


def test_a_group_opened_as_an_array_is_zarrs_node_type_error(tmp_path):
    _group(tmp_path / "g.zarr")
    with pytest.raises(errors.NodeTypeValidationError) as caught:
        zarrs_nvcomp.open_array(tmp_path / "g.zarr")
    assert isinstance(caught.value, zarrs_nvcomp.NodeTypeValidationError)
    assert isinstance(caught.value, zarrs_nvcomp.StoreError)
    assert "its arrays: inner" in str(caught.value)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_over_an_array_or_a_group_is_zarrs_contains_error(tmp_path, zarr_format):
    array_path, group_path = tmp_path / "a.zarr", tmp_path / "g.zarr"
    zarr.create_array(str(array_path), shape=(4,), dtype="i4", zarr_format=zarr_format)
    zarr.open_group(str(group_path), mode="w", zarr_format=zarr_format)
    with pytest.raises(errors.ContainsArrayError) as on_array:
        zarrs_nvcomp.create_array(str(array_path), shape=(2,), dtype="i4", zarr_format=zarr_format)
    assert isinstance(on_array.value, zarrs_nvcomp.ContainsArrayError)
    assert not isinstance(on_array.value, errors.ContainsGroupError)
    assert "already holds a zarr array" in str(on_array.value)
    with pytest.raises(errors.ContainsGroupError) as on_group:
        zarrs_nvcomp.create_array(str(group_path), shape=(2,), dtype="i4", zarr_format=zarr_format)
    assert isinstance(on_group.value, zarrs_nvcomp.ContainsGroupError)
    assert "group" in str(on_group.value)


def test_the_errors_import_without_zarr_and_keep_their_builtin_bases():
    blocker = textwrap.dedent(
        """
        import importlib.abc, sys
        class _NoZarr(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "zarr" or name.startswith("zarr."):
                    raise ModuleNotFoundError(name)
                return None
        sys.meta_path.insert(0, _NoZarr())
        import zarrs_nvcomp
        assert "zarr" not in sys.modules
        assert issubclass(zarrs_nvcomp.ArrayNotFoundError, (FileNotFoundError))
        assert issubclass(zarrs_nvcomp.ArrayNotFoundError, zarrs_nvcomp.StoreError)
        assert issubclass(zarrs_nvcomp.ContainsGroupError, ValueError)
        print(" ".join(c.__name__ for c in zarrs_nvcomp.ContainsArrayError.__mro__))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "ContainsArrayError",
        "ZarrsNvcompError",
        "ValueError",
        "Exception",
        "BaseException",
        "object",
    ]
