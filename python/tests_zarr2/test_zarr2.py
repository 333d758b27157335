"""zarr 2 with NvCompBatchCodec as the compressor."""

from __future__ import annotations

from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

CPU_ALGORITHMS = ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"]

EXAMPLE = """
from pathlib import Path

import numcodecs
import numpy as np
import zarr

codec = numcodecs.registry.get_codec(dict(id="nvcomp_batch", algorithm="lz4"))
shape = (16, 16)
chunks = (8, 8)
data = np.random.randn(*shape).astype(np.float32)
z1 = zarr.array(data, chunks=chunks, compressor=codec)
zarr_store = zarr.MemoryStore()
zarr.save_array(zarr_store, z1, compressor=codec)
z2 = zarr.open_array(zarr_store)
np.testing.assert_equal(z1[:], z2[:])
"""


def test_example_as_written():
    exec(compile(EXAMPLE, "<zarr 2 example>", "exec"), {})


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_example_each_algorithm(algorithm):
    code = EXAMPLE.replace('algorithm="lz4"', f'algorithm="{algorithm}"')
    exec(compile(code, f"<zarr 2 example {algorithm}>", "exec"), {})


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
@pytest.mark.parametrize(
    ("dtype", "shape", "chunks"),
    [("float32", (37, 21), (10, 8)), ("int64", (100,), (33,)), ("uint8", (4, 5, 6), (2, 5, 4))],
)
def test_store_written_and_read_back(tmp_path, algorithm, dtype, shape, chunks):
    from zarrs_nvcomp import NvCompBatchCodec

    rng = np.random.default_rng(0)
    data = (rng.standard_normal(shape) * 100).astype(dtype)
    path = str(tmp_path / "array.zarr")
    z = zarr.open_array(
        path,
        mode="w",
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        compressor=NvCompBatchCodec(algorithm, device="cpu"),
    )
    z[:] = data
    z[: chunks[0]] = 0  # rewrite a few chunks
    data[: chunks[0]] = 0
    back = zarr.open_array(path, mode="r")
    assert back.compressor.codec_id == "nvcomp_batch"
    assert back.compressor.get_config()["algorithm"] == algorithm
    np.testing.assert_array_equal(back[:], data)


def test_registry_entry_point():
    codec = numcodecs.registry.get_codec({"id": "nvcomp_batch", "algorithm": "zstd"})
    assert type(codec).__name__ == "NvCompBatchCodec"


GPU_ZARR2 = Path(__file__).parent.parent / "tests" / "fixture" / "zarr2_gpu"


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_store_written_on_the_gpu_reads_without_one(algorithm):
    # Written on the H200 by scripts/write_gpu_zarr2_fixture.py.
    z = zarr.open_array(str(GPU_ZARR2 / f"{algorithm}.zarr"), mode="r")
    assert z.attrs["written_by"].startswith("zarrs_nvcomp on cuda"), dict(z.attrs)
    np.testing.assert_array_equal(z[:], np.load(GPU_ZARR2 / "expected.npy"))


@pytest.mark.parametrize(
    "compressor", ["zstd", "gzip", "lz4", "zlib", {"id": "nvcomp_batch", "algorithm": "lz4"}]
)
def test_arrays_written_by_write_chunks_parallel_read_in_zarr_2(tmp_path, compressor):
    import zarrs_nvcomp

    path = str(tmp_path / "w.zarr")
    rng = np.random.default_rng(7)
    data = np.cumsum(rng.standard_normal((45, 70)), axis=1).round(2).astype(np.float32) + 9
    data[:16, :32] = 0  # a chunk of the fill value, not stored
    array = zarrs_nvcomp.create_array(
        path,
        shape=data.shape,
        dtype="float32",
        chunks=(16, 32),
        compressor=compressor,
        zarr_format=2,
    )
    assert zarrs_nvcomp.write_chunks_parallel(array, data, device="cpu") == (8, 1)
    array[5:25, 30:63] = data[5:25, 30:63] * 2
    data[5:25, 30:63] *= 2
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], data)


def test_errors_named_as_zarr_2s_are_caught_as_them_with_the_packages_messages(tmp_path):
    import zarr.errors

    import zarrs_nvcomp

    zarr.open_array(str(tmp_path / "a.zarr"), mode="w", shape=(4,), dtype="i4")
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(zarr.errors.ContainsArrayError, match="already holds a zarr array"):
        zarrs_nvcomp.create_array(str(tmp_path / "a.zarr"), shape=(2,), dtype="i4", zarr_format=2)
    with pytest.raises(zarr.errors.ContainsGroupError, match="already holds a zarr group"):
        zarrs_nvcomp.create_array(str(tmp_path / "g.zarr"), shape=(2,), dtype="i4", zarr_format=2)
    with pytest.raises(zarr.errors.ArrayNotFoundError, match="nothing at this path") as missing:
        zarrs_nvcomp.open_array(str(tmp_path / "missing.zarr"))
    assert isinstance(missing.value, FileNotFoundError)
    assert missing.value.filename == str(tmp_path / "missing.zarr")
