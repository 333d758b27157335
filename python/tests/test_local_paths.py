"""Local paths as a user means them: ``~`` expanded, a missing path a
``FileNotFoundError`` (and the package's ``StoreError``), a group's path an
error naming the group's arrays."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import StoreError


@pytest.mark.parametrize("prefix", ["", "file://"])
def test_a_missing_path_is_a_file_not_found_error_and_a_store_error(tmp_path, prefix):
    missing = tmp_path / "missing.zarr"
    for call in (zarrs_nvcomp.open_array, zarrs_nvcomp.read_chunks_parallel):
        with pytest.raises(FileNotFoundError) as info:
            call(f"{prefix}{missing}")
        assert isinstance(info.value, StoreError)
        assert info.value.filename == str(missing)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_group_path_names_the_groups_arrays(tmp_path, zarr_format):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=zarr_format)
    for name in ("temperature", "pressure"):
        group.create_array(name, shape=(4,), dtype="f4")
    group.create_group("nested").create_group("deeper").create_array("wind", shape=(2,), dtype="f4")
    group.create_group("empty")
    with pytest.raises(
        StoreError,
        match=r"is a group, not an array; its arrays: nested/deeper/wind, pressure, temperature$",
    ):
        zarrs_nvcomp.open_array(str(tmp_path / "g.zarr"))
    # The arrays it names open.
    assert zarrs_nvcomp.open_array(str(tmp_path / "g.zarr" / "pressure")).shape == (4,)
    assert zarrs_nvcomp.open_array(str(tmp_path / "g.zarr" / "nested/deeper/wind")).shape == (2,)


def test_a_group_of_many_arrays_names_twenty_and_counts_the_rest(tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    for i in range(25):
        group.create_array(f"a{i:02}", shape=(1,), dtype="u1")
    with pytest.raises(StoreError, match=r"its arrays: a00, a01, .*, a19 and 5 more$"):
        zarrs_nvcomp.open_array(str(tmp_path / "g.zarr"))


def test_a_leading_tilde_is_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    made = zarrs_nvcomp.create_array("~/home.zarr", data=np.arange(6, dtype="int8"), chunks=3)
    assert (tmp_path / "home.zarr" / "zarr.json").is_file()
    np.testing.assert_array_equal(zarrs_nvcomp.open_array("~/home.zarr")[...], np.arange(6))
    assert made.url == str(tmp_path / "home.zarr")
