"""xarray reading through zarrs_nvcomp.NvcompCodecPipeline: open_zarr and
open_dataset(engine="zarr") load what zarr's default pipeline loads, with
chunks decoded in batches (on the GPU into CuPy arrays under enable_gpu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from conftest import cupy_or_skip
from zarr.codecs import ZstdCodec

xr = pytest.importorskip("xarray")

PIPELINE = {"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}
EXAMPLE = Path(__file__).parents[2] / "examples" / "xarray_gpu.py"


@pytest.fixture(scope="module", params=[2, 3], ids=["v2", "v3"])
def dataset(request, tmp_path_factory):
    zarr_format = request.param
    path = tmp_path_factory.mktemp("xarray") / "ds.zarr"
    rng = np.random.default_rng(3)
    ds = xr.Dataset(
        {
            "temperature": (("t", "y", "x"), rng.standard_normal((6, 40, 30)).astype("f4")),
            "counts": (("y", "x"), rng.integers(0, 1000, (40, 30)).astype("u2")),
        },
        coords={"t": np.arange(6), "y": np.linspace(0, 1, 40), "x": np.arange(30) * 2.0},
    )
    compressor = (
        {"compressors": numcodecs.Zstd(level=1)}
        if zarr_format == 2
        else {"compressors": [ZstdCodec(level=1)]}
    )
    encoding = {
        "temperature": {"chunks": (2, 16, 16), **compressor},
        "counts": {"chunks": (16, 16), **compressor},
    }
    ds.to_zarr(path, zarr_format=zarr_format, encoding=encoding, mode="w", consolidated=False)
    return path, ds


@pytest.mark.parametrize("chunks", [None, {}], ids=["eager", "dask"])
def test_open_zarr_loads_through_the_pipeline(dataset, chunks, paths):
    path, expected = dataset
    with zarr.config.set(PIPELINE):
        ds = xr.open_zarr(path, chunks=chunks, consolidated=False).load()
    xr.testing.assert_identical(ds.drop_encoding(), expected)
    # Every read, coordinates included, is one call of the reader.
    assert paths and all(kind == "reader" for kind, _ in paths)
    whole = (slice(0, 6, 1), slice(0, 40, 1), slice(0, 30, 1))
    if chunks is None:
        assert ("reader", whole) in paths
    else:
        # temperature in Dask chunks of one stored chunk each (3 x 3 x 2).
        blocks = [s for _, s in paths if len(s) == 3]
        assert len(blocks) == 18


def test_open_dataset_engine_zarr_loads_through_the_pipeline(dataset, paths):
    path, expected = dataset
    with zarr.config.set(PIPELINE):
        ds = xr.open_dataset(path, engine="zarr", chunks=None, consolidated=False)
        subset = ds["temperature"].isel(t=slice(1, 5), x=slice(3, 29, 2)).load()
    np.testing.assert_array_equal(subset.values, expected["temperature"].values[1:5, :, 3:29:2])
    assert ("reader", (slice(1, 5, 1), slice(0, 40, 1), slice(3, 28, 2))) in paths


def test_the_example_runs_on_the_cpu():
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--size-mb", "4", "--cpu"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "'field': 'numpy'" in out.stdout
    assert "matches zarr's default pipeline" in out.stdout


@pytest.mark.gpu
def test_variables_load_as_cupy_arrays_decoded_on_the_gpu(dataset, paths):
    cp = cupy_or_skip()
    path, expected = dataset
    with zarr.config.set(PIPELINE):
        ds = xr.open_zarr(path, chunks=None, consolidated=False)
        with zarr.config.enable_gpu():
            ds = ds.load()
    for name in ("temperature", "counts"):
        assert isinstance(ds[name].data, cp.ndarray), type(ds[name].data)
        np.testing.assert_array_equal(cp.asnumpy(ds[name].data), expected[name].values)
    assert ("reader", (slice(0, 6, 1), slice(0, 40, 1), slice(0, 30, 1))) in paths


@pytest.mark.gpu
def test_the_example_runs_on_the_gpu():
    cupy_or_skip()
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--size-mb", "64"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "'field': 'cupy'" in out.stdout, out.stdout
    assert "matches zarr's default pipeline" in out.stdout
