"""Writes python/tests/fixture/zarr2_gpu: one zarr 2 array per algorithm with a
CPU library, compressed by NvCompBatchCodec on the GPU (zarr 3 writing the
zarr 2 format). The tests read them back on machines without a GPU, with zarr
2.18 and with zarr 3, and compare them with ``expected.npy``.

    python scripts/write_gpu_zarr2_fixture.py     # on a GPU machine
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import zarr
from zarrs_nvcomp import NvCompBatchCodec

ROOT = (
    Path(__file__).resolve().parent.parent
    / "python"
    / "tests"
    / "fixture"
    / "zarr2_gpu"
)
ALGORITHMS = ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"]


def main() -> None:
    rng = np.random.default_rng(20261130)
    data = np.cumsum(rng.standard_normal((20, 30)), axis=1).round(2).astype(np.float32)
    ROOT.mkdir(parents=True, exist_ok=True)
    np.save(ROOT / "expected.npy", data)
    for algorithm in ALGORITHMS:
        codec = NvCompBatchCodec(algorithm, device="cuda")
        path = ROOT / f"{algorithm}.zarr"
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.create_array(
            zarr.storage.LocalStore(path),
            shape=data.shape,
            chunks=(8, 8),
            dtype=data.dtype,
            zarr_format=2,
            compressors=codec,
        )
        z[:] = data
        z.attrs["written_by"] = f"zarrs_nvcomp on {codec.backend}"
        np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], data)
        print(f"{path.name}: {z.attrs['written_by']}", file=sys.stderr)


if __name__ == "__main__":
    main()
