"""A user's script as a type checker sees it: `make lint` runs `mypy --strict`
over it, so that the package's annotations (storage options, algorithm
names, read options) are what a user's code checks against."""

from __future__ import annotations

import numpy as np

import zarrs_nvcomp
from zarrs_nvcomp.types import StorageOptions


def main() -> None:
    options: StorageOptions = {"anon": True, "region": "us-east-1", "timeout": "30s"}
    codec = zarrs_nvcomp.NvCompBatchCodec("zstd", device="cpu")
    encoded = codec.encode_batch([np.arange(10, dtype="int32")])
    assert len(encoded) == 1
    array = zarrs_nvcomp.create_array(
        "typed.zarr", data=np.zeros((4, 4), dtype="float32"), compressors="lz4", overwrite=True
    )
    whole = zarrs_nvcomp.read_chunks_parallel(
        "typed.zarr", device="cpu", max_concurrent_requests=8, progress=False
    )
    assert whole.shape == array.shape
    del options


if __name__ == "__main__":
    main()
