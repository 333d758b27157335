"""The chunk-parallel writer: arrays written by write_chunks_parallel (and
Array.__setitem__) read back element for element by zarr-python and by this
project's reader, for every batched chain in zarr v2 and v3 and for sharded
arrays; partial writes keep what is around them; fill-value chunks are not
stored; S3 through moto; GPU data on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from conftest import cupy_or_skip, s3_options

import zarrs_nvcomp
from zarrs_nvcomp import NvCompBatchCodec

SHAPE = (45, 70)
CHUNKS = (16, 32)

# zarr-python reads these itself; nvcomp_batch ones through this package's codec.
COMPRESSORS = [
    pytest.param("zstd", id="zstd"),
    pytest.param("gzip", id="gzip"),
    pytest.param("lz4", id="lz4"),
    pytest.param("zlib", id="zlib"),
    pytest.param(NvCompBatchCodec("lz4"), id="nvcomp-lz4"),
    pytest.param({"id": "nvcomp_batch", "algorithm": "zstd"}, id="nvcomp-zstd"),
    pytest.param(
        {"name": "zstd", "configuration": {"level": 1, "checksum": True}}, id="zstd-checksum"
    ),
]


def field(shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.standard_normal(shape), axis=-1).round(2).astype(np.float32) + 500


def assert_reads_back(path, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], expected)
    np.testing.assert_array_equal(
        zarrs_nvcomp.read_chunks_parallel(str(path), device="cpu"), expected
    )


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_written_arrays_read_like_the_data(tmp_path, compressor, zarr_format) -> None:
    if zarr_format == 2 and isinstance(compressor, dict) and "name" in compressor:
        compressor = {"name": "zstd", "configuration": {"level": 1}}
    path = tmp_path / "a.zarr"
    array = zarrs_nvcomp.create_array(
        str(path),
        shape=SHAPE,
        dtype="float32",
        chunks=CHUNKS,
        compressor=compressor,
        zarr_format=zarr_format,
        fill_value=0,
    )
    assert array.batched_algorithm is not None, array.fallback_reason
    expected = field(SHAPE, 1)
    assert zarrs_nvcomp.write_chunks_parallel(str(path), expected, device="cpu") == (3 * 3, 0)
    assert_reads_back(path, expected)
    # Partly covered chunks keep the elements around the selection.
    patch = field((20, 33), 2)
    array[5:25, 30:63] = patch
    expected[5:25, 30:63] = patch
    assert_reads_back(path, expected)
    # Broadcast scalars and dropped axes.
    array[7, :] = 1.5
    expected[7, :] = 1.5
    assert_reads_back(path, expected)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float64", "complex64", "bool"])
def test_data_types_and_casts(tmp_path, dtype) -> None:
    path = tmp_path / "t.zarr"
    zarrs_nvcomp.create_array(str(path), shape=(30, 9), dtype=dtype, chunks=(8, 4), fill_value=1)
    data = (np.arange(270).reshape(30, 9) % 7).astype(dtype)
    zarrs_nvcomp.write_chunks_parallel(
        str(path), data.astype(">" + data.dtype.str[1:]), device="cpu"
    )
    assert_reads_back(path, data)


def test_sharded_arrays_read_like_the_data(tmp_path) -> None:
    path = tmp_path / "s.zarr"
    array = zarrs_nvcomp.create_array(
        str(path), shape=SHAPE, dtype="float32", chunks=(8, 16), shards=(16, 32)
    )
    expected = field(SHAPE, 3)
    array[...] = expected
    array[10:30, 3:50] = expected[10:30, 3:50] * 2
    expected[10:30, 3:50] *= 2
    assert_reads_back(path, expected)
    meta = zarr.open_array(str(path), mode="r").metadata.to_dict()
    assert meta["codecs"][0]["name"] == "sharding_indexed"


def test_fill_value_chunks_are_not_stored(tmp_path) -> None:
    path = tmp_path / "f.zarr"
    array = zarrs_nvcomp.create_array(
        str(path), shape=(32, 32), dtype="int32", chunks=(16, 16), fill_value=7
    )
    data = np.full((32, 32), 7, dtype=np.int32)
    data[16:, 16:] = 3
    assert zarrs_nvcomp.write_chunks_parallel(array, data, device="cpu") == (1, 3)
    assert sorted(p.relative_to(path).as_posix() for p in path.rglob("c/*/*")) == ["c/1/1"]
    # The stored chunk becomes fill: deleted.
    array[16:, 16:] = 7
    assert not (path / "c" / "1" / "1").exists()
    kept = zarrs_nvcomp.write_chunks_parallel(array, data, device="cpu", write_empty_chunks=True)
    assert kept == (4, 0)
    assert_reads_back(path, data)


def test_bad_writes_raise_clear_errors(tmp_path) -> None:
    path = tmp_path / "e.zarr"
    array = zarrs_nvcomp.create_array(str(path), shape=(10, 10), dtype="float32", chunks=(5, 5))
    with pytest.raises(ValueError, match="broadcast"):
        array[0:5, 0:5] = np.ones((4, 4), dtype=np.float32)
    with pytest.raises(IndexError, match="steps of 1"):
        array[::2] = 1.0
    with pytest.raises(IndexError):
        array[20] = 1.0
    with pytest.raises(ValueError, match="unknown compressor"):
        zarrs_nvcomp.create_array(str(path), shape=(4,), dtype="f4", chunks=(2,), compressor="xz")
    with pytest.raises(ValueError, match="sharded"):
        zarrs_nvcomp.create_array(
            str(path), shape=(4,), dtype="f4", chunks=(2,), shards=(4,), zarr_format=2
        )


@pytest.mark.parametrize(
    ("value", "why"),
    [(1e7, "out of bounds"), (-300, "out of bounds"), (float("nan"), "NaN"), ("x", "literal")],
)
@pytest.mark.parametrize("write", ["setitem", "function"])
def test_data_that_does_not_fit_the_dtype_is_a_package_error(tmp_path, value, why, write) -> None:
    # The entry-point fuzz found NumPy's OverflowError/ValueError escaping.
    path = tmp_path / "f.zarr"
    array = zarrs_nvcomp.create_array(str(path), shape=(4,), dtype="uint16", chunks=(2,))
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match=why) as raised:
        if write == "setitem":
            array[:] = value
        else:
            zarrs_nvcomp.write_chunks_parallel(array, value)
    assert "uint16" in str(raised.value)
    assert (array[:] == 0).all()


def test_writes_to_s3(moto_endpoint) -> None:
    endpoint, client = moto_endpoint
    url = "s3://bucket/written.zarr"
    options = s3_options(endpoint)
    array = zarrs_nvcomp.create_array(
        url, shape=SHAPE, dtype="float32", chunks=CHUNKS, storage_options=options
    )
    expected = field(SHAPE, 4)
    zarrs_nvcomp.write_chunks_parallel(url, expected, storage_options=options, device="cpu")
    array[0:3, 0:3] = 0.0
    expected[0:3, 0:3] = 0.0
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="bucket")["Contents"]}
    assert "written.zarr/zarr.json" in keys and "written.zarr/c/2/2" in keys
    read = zarrs_nvcomp.read_chunks_parallel(url, storage_options=options, device="cpu")
    np.testing.assert_array_equal(read, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("compressor", ["zstd", "zlib", {"id": "nvcomp_batch", "algorithm": "ans"}])
def test_gpu_data_is_written_on_the_gpu(tmp_path, compressor) -> None:
    cp = cupy_or_skip()
    path = tmp_path / "g.zarr"
    array = zarrs_nvcomp.create_array(
        str(path), shape=SHAPE, dtype="float32", chunks=CHUNKS, compressor=compressor
    )
    expected = field(SHAPE, 5)
    expected[:16, :32] = 0  # one fill-value chunk
    stored, fill_chunks = zarrs_nvcomp.write_chunks_parallel(array, cp.asarray(expected))
    # The fill chunk is found on the device whatever the compressor makes of
    # it (nvCOMP's ANS compresses constant chunks only about 8-fold).
    assert (stored, fill_chunks) == (8, 1)
    array[5:25, 30:63] = cp.asarray(expected[5:25, 30:63] + 1)
    expected[5:25, 30:63] += 1
    read = zarrs_nvcomp.read_chunks_parallel(str(path), device="cuda")
    np.testing.assert_array_equal(cp.asnumpy(read), expected)
    if compressor != {"id": "nvcomp_batch", "algorithm": "ans"}:
        assert_reads_back(path, expected)
