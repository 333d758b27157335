"""zarrs_nvcomp.to_dask: Dask arrays whose tasks read blocks with the batched
reader, on a dask.distributed cluster."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from conftest import create_like, cupy_or_skip
from zarr.codecs import ZstdCodec

import zarrs_nvcomp
from zarrs_nvcomp.dask import default_chunks

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster_client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    rng = np.random.default_rng(7)
    data = rng.standard_normal((96, 70)).astype("<f4")
    plain = create_like(root / "plain.zarr", data, chunks=(16, 10), compressors=[ZstdCodec()])
    plain[...] = data
    sharded = create_like(
        root / "sharded.zarr", data, shards=(32, 20), chunks=(8, 10), compressors=[ZstdCodec()]
    )
    sharded[...] = data
    return root, data


def test_default_blocks_are_whole_stored_chunks_of_about_the_target():
    # 1 MiB chunks of float32 and a 16 MiB target: rows of 4 chunks, then 4 rows.
    assert default_chunks((4096, 1024), (512, 512), 4, 16 << 20) == (4096, 1024)
    assert default_chunks((8192, 1024), (512, 512), 4, 16 << 20) == (4096, 1024)
    assert default_chunks((8192, 8192), (512, 512), 4, 16 << 20) == (512, 8192)
    assert default_chunks((100, 8192, 8192), (1, 512, 512), 4, 16 << 20) == (1, 512, 8192)
    # Chunks larger than the target stay whole; chunks beyond the shape are cut to it.
    assert default_chunks((10, 10), (64, 64), 8, 100) == (10, 10)
    assert default_chunks((1000,), (100,), 1, 250) == (200,)
    assert default_chunks((0, 5), (4, 4), 4, 1 << 20) == (1, 5)


def test_blocks_read_on_a_distributed_cluster(cluster_client, arrays):
    root, data = arrays
    for name in ("plain.zarr", "sharded.zarr"):
        x = zarrs_nvcomp.to_dask(root / name, device="cpu")
        assert x.shape == data.shape and x.dtype == data.dtype
        assert isinstance(x._meta, np.ndarray)
        np.testing.assert_array_equal(x.compute(), data)
        np.testing.assert_allclose(x.mean().compute(), data.mean(dtype="f8"), rtol=1e-5)


def test_explicit_chunks_cut_stored_chunks(cluster_client, arrays):
    root, data = arrays
    x = zarrs_nvcomp.to_dask(str(root / "plain.zarr"), chunks=(25, 33), device="cpu")
    assert x.chunks[0] == (25, 25, 25, 21)
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_array_equal(x[10:90:7, 3].compute(), data[10:90:7, 3])
    np.testing.assert_allclose(x.sum(axis=0).compute(), data.sum(axis=0), rtol=1e-4)


def test_default_chunks_are_stored_chunk_multiples(arrays):
    root, _ = arrays
    x = zarrs_nvcomp.to_dask(root / "sharded.zarr", device="cpu")
    # The whole (small) array is one block; its size is a whole number of shards.
    assert x.chunks == ((96,), (70,))
    y = zarrs_nvcomp.to_dask(zarr.open_array(root / "plain.zarr", mode="r"), device="cpu")
    assert y.name == zarrs_nvcomp.to_dask(root / "plain.zarr", device="cpu").name


def test_the_same_array_twice_is_one_graph_and_other_devices_another(arrays):
    root, _ = arrays
    a = zarrs_nvcomp.to_dask(root / "plain.zarr", device="cpu")
    b = zarrs_nvcomp.to_dask(root / "plain.zarr", device="cpu")
    c = zarrs_nvcomp.to_dask(root / "plain.zarr", chunks=(16, 10), device="cpu")
    assert a.name == b.name != c.name


@pytest.mark.gpu
def test_blocks_stay_on_the_gpu(arrays):
    cp = cupy_or_skip()
    root, data = arrays
    x = zarrs_nvcomp.to_dask(root / "plain.zarr", chunks=(32, 35), device="cuda")
    assert isinstance(x._meta, cp.ndarray)
    block = x.blocks[1, 1].compute(scheduler="threads")
    assert isinstance(block, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(block), data[32:64, 35:70])
    total = x.sum().compute(scheduler="threads")
    np.testing.assert_allclose(float(total), data.sum(dtype="f8"), rtol=1e-4)
