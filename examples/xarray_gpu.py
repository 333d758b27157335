"""xarray on the batched path: ``xr.open_zarr(...).load()`` with
``zarrs_nvcomp.NvcompCodecPipeline`` as zarr's codec pipeline decodes every
chunk of a variable in one batch: on the GPU into CuPy arrays under
``zarr.config.enable_gpu()``, on the CPU in parallel otherwise.

    python examples/xarray_gpu.py [STORE] [--size-mb 64] [--cpu]

Without STORE, writes a sample dataset (zstd, zarr v3) to a temporary
directory first. STORE may be a path or an ``s3://`` URL (with
``--anon``). Prints where the variables were loaded and checks them against
zarr's default pipeline on the CPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
import zarrs_nvcomp
from zarr.codecs import ZstdCodec


def write_sample(path: Path, size_mb: int) -> None:
    """Two float32 variables on a (time, y, x) grid, 1 MiB zstd chunks."""
    ny, nx = 512, 512
    nt = max(1, size_mb * (1 << 20) // (2 * 4 * ny * nx))
    rng = np.random.default_rng(0)
    shape = (nt, ny, nx)
    field = np.cumsum(rng.standard_normal(shape, dtype=np.float32), axis=2).round(2)
    ds = xr.Dataset(
        {
            "field": (("time", "y", "x"), field),
            "noise": (("time", "y", "x"), rng.standard_normal(shape, dtype=np.float32)),
        },
        coords={
            "time": np.arange(nt),
            "y": np.arange(ny) * 0.5,
            "x": np.arange(nx) * 0.5,
        },
    )
    chunking = {"chunks": (1, ny, nx), "compressors": [ZstdCodec(level=1)]}
    ds.to_zarr(
        path, zarr_format=3, encoding={"field": chunking, "noise": chunking}, mode="w"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "store", nargs="?", help="a zarr store (path or URL); default: a sample"
    )
    parser.add_argument("--size-mb", type=int, default=64, help="size of the sample")
    parser.add_argument(
        "--cpu", action="store_true", help="load into host memory even with a GPU"
    )
    parser.add_argument("--anon", action="store_true", help="anonymous S3 access")
    args = parser.parse_args()

    storage_options = {"anon": True} if args.anon else None
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            store = str(Path(tmp) / "sample.zarr")
            write_sample(Path(store), args.size_mb)

        on_gpu = not args.cpu and zarrs_nvcomp.gpu_available()
        # zarr picks the pipeline when it opens an array: set it before opening.
        with zarr.config.set(
            {"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}
        ):
            # chunks=None: no Dask; each variable loads with one zarr read, whose
            # chunks the pipeline decodes in one batch. Coordinates load here,
            # on the host, into pandas indexes.
            ds = xr.open_zarr(store, chunks=None, storage_options=storage_options)
            start = time.perf_counter()
            if on_gpu:
                with zarr.config.enable_gpu():
                    ds = ds.load()
            else:
                ds = ds.load()
            seconds = time.perf_counter() - start

        nbytes = sum(v.nbytes for v in ds.data_vars.values())
        kinds = {
            name: type(v.data).__module__.split(".")[0]
            for name, v in ds.data_vars.items()
        }
        print(f"loaded {nbytes / 2**20:.0f} MiB in {seconds * 1e3:.0f} ms: {kinds}")

        reference = xr.open_zarr(
            store, chunks=None, storage_options=storage_options
        ).load()
        for name, variable in ds.data_vars.items():
            data = variable.data
            host = data.get() if hasattr(data, "get") else np.asarray(data)
            np.testing.assert_array_equal(host, reference[name].values)
        print("matches zarr's default pipeline")


if __name__ == "__main__":
    main()
