"""``Array`` pickles as its URL and storage options, so Dask reads it from
other processes: its processes scheduler and ``dask.distributed``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import zarr

from zarrs_nvcomp import Array, open_array


def write(path) -> np.ndarray:
    data = np.arange(40 * 30, dtype="float32").reshape(40, 30)
    z = zarr.create_array(str(path), shape=data.shape, chunks=(10, 10), dtype=data.dtype)
    z[...] = data
    return data


def test_array_pickles_as_url_and_options(tmp_path):
    write(tmp_path / "a")
    options = {"timeout": "30s"}
    a = open_array(str(tmp_path / "a"), storage_options=options)
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, Array) and b is not a
    assert (b.url, b.shape, b.dtype, b._storage_options) == (a.url, a.shape, a.dtype, options)
    np.testing.assert_array_equal(b.read(device="cpu"), a.read(device="cpu"))
    # The open handle is not pickled: only the URL and the options.
    assert len(pickle.dumps(a)) < 500


def test_unpickling_reopens_the_array(tmp_path):
    data = write(tmp_path / "a")
    blob = pickle.dumps(open_array(str(tmp_path / "a")))
    # Rewritten after pickling: the unpickled array sees the new data.
    zarr.open_array(str(tmp_path / "a"), mode="r+")[...] = data + 1
    np.testing.assert_array_equal(pickle.loads(blob).read(device="cpu"), data + 1)


def test_dask_processes_scheduler(tmp_path):
    da = pytest.importorskip("dask.array", reason="dask is not installed")
    data = write(tmp_path / "a")
    x = da.from_array(open_array(str(tmp_path / "a")), chunks=(20, 15))
    got = x.sum(axis=0).compute(scheduler="processes", num_workers=2)
    np.testing.assert_array_equal(got, data.sum(axis=0))


def test_dask_distributed(tmp_path):
    da = pytest.importorskip("dask.array", reason="dask is not installed")
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    data = write(tmp_path / "a")
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, timeout="60s") as client,
    ):
        x = da.from_array(open_array(str(tmp_path / "a")), chunks=(10, 30))
        got = client.compute(x[::3] * 2).result(timeout=120)
    np.testing.assert_array_equal(got, data[::3] * 2)
