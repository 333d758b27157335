"""`open_array(..., mode=...)` with zarr's modes: "r" reads only, "r+" and
"a" read and write, the creating modes name create_array."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import zarrs_nvcomp
from zarrs_nvcomp import InvalidArgumentError


@pytest.fixture
def path(tmp_path):
    path = tmp_path / "a.zarr"
    zarrs_nvcomp.create_array(str(path), data=np.arange(12, dtype="i4"), chunks=4)
    return str(path)


def test_mode_r_reads_and_refuses_writes(path):
    array = zarrs_nvcomp.open_array(path, mode="r")
    assert array.read_only
    np.testing.assert_array_equal(array.read(device="cpu"), np.arange(12))
    with pytest.raises(InvalidArgumentError, match="mode='r'"):
        array[0:4] = 7
    with pytest.raises(InvalidArgumentError, match="mode='r'"):
        zarrs_nvcomp.write_chunks_parallel(array, np.zeros(12, "i4"))
    # Nothing was written; a read-only array pickles read-only.
    again = pickle.loads(pickle.dumps(array))
    assert again.read_only
    np.testing.assert_array_equal(again.read(device="cpu"), np.arange(12))


@pytest.mark.parametrize("mode", ["r+", "a"])
def test_writable_modes_write(path, mode):
    array = zarrs_nvcomp.open_array(path, mode=mode)
    assert not array.read_only
    array[0:4] = 7
    np.testing.assert_array_equal(zarrs_nvcomp.open_array(path)[0:4], [7, 7, 7, 7])
    assert not pickle.loads(pickle.dumps(array)).read_only


def test_an_opened_array_reopened_with_mode_r_is_read_only(path):
    writable = zarrs_nvcomp.open_array(path)
    read_only = zarrs_nvcomp.open_array(writable, mode="r")
    assert read_only.read_only and not writable.read_only


@pytest.mark.parametrize(
    ("mode", "words"), [("w", "create_array"), ("w-", "create_array"), ("x", "'x'")]
)
def test_other_modes_are_invalid_arguments(path, mode, words):
    with pytest.raises(InvalidArgumentError, match=words):
        zarrs_nvcomp.open_array(path, mode=mode)
