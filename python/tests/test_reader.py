"""The chunk-parallel reader (``read_chunks_parallel``, ``open_array``) against
arrays written by zarr-python, compared element by element with zarr-python's
own reads: zarr v2 and v3, every NumPy data type zarr has, 1-D to 4-D, batched
chains and chains read by the zarrs pipeline, selections, errors, S3 (moto)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs
from conftest import cupy_or_skip, s3_options, upload

import zarrs_nvcomp
from zarrs_nvcomp import DecodeError, StoreError, open_array, read_chunks_parallel
from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec

DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]

# (shape, chunks): chunk shapes that divide the shape and shapes that do not.
SHAPES = [
    ((37,), (8,)),
    ((20, 21), (5, 7)),
    ((19, 23), (5, 7)),
    ((9, 10, 11), (4, 5, 3)),
    ((5, 6, 7, 4), (2, 3, 4, 4)),
]


def sample(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.3
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    real = rng.standard_normal(shape) * 100
    return (real + 1j * rng.standard_normal(shape)).astype(dtype)


def write(path: Path, data: np.ndarray, chunks, **kwargs) -> zarr.Array:
    z = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype, **kwargs)
    z[...] = data
    return z


def expected(path: Path, selection=...) -> np.ndarray:
    """zarr-python's read of the whole array, then NumPy's selection (zarr-python
    has no negative steps)."""
    return np.asarray(zarr.open_array(str(path), mode="r")[...])[selection]


def check(path: Path, selection=..., **kwargs) -> np.ndarray:
    got = read_chunks_parallel(str(path), selection, device="cpu", **kwargs)
    want = expected(path, selection)
    assert isinstance(got, np.ndarray)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return got


V3_COMPRESSORS = {
    "zstd": None,  # zarr-python's default (zstd)
    "gzip": zarr.codecs.GzipCodec(level=5),
    "zstd+crc32c": zarr.codecs.ZstdCodec(level=3, checksum=True),
    "nvcomp lz4": NvCompBatchZarrCodec(algorithm="lz4"),
}


@pytest.mark.parametrize("compressor", list(V3_COMPRESSORS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_v3_batched_chains_read_like_zarr(tmp_path, compressor, dtype):
    rank = DTYPES.index(dtype) % len(SHAPES)
    shape, chunks = SHAPES[rank]
    data = sample(shape, dtype, seed=rank)
    codec = V3_COMPRESSORS[compressor]
    kwargs = {} if codec is None else {"compressors": codec}
    write(tmp_path / "a.zarr", data, chunks, **kwargs)
    array = open_array(str(tmp_path / "a.zarr"))
    assert array.batched_algorithm is not None, array.fallback_reason
    assert array.shape == shape and array.dtype == data.dtype and array.chunks == chunks
    got = check(tmp_path / "a.zarr")
    np.testing.assert_array_equal(got, data)
    # A selection cutting chunks on every axis.
    check(tmp_path / "a.zarr", tuple(slice(1, n - 1) for n in shape))


V2_COMPRESSORS = {
    "zstd": numcodecs.Zstd(level=1),
    "gzip": numcodecs.GZip(level=5),
    "lz4": numcodecs.LZ4(),
    "zlib": numcodecs.Zlib(level=3),
    "nvcomp_batch": zarrs_nvcomp.NvCompBatchCodec(algorithm="zstd"),
}


@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_v2_batched_chains_read_like_zarr(tmp_path, compressor, dtype):
    rank = (DTYPES.index(dtype) + 2) % len(SHAPES)
    shape, chunks = SHAPES[rank]
    data = sample(shape, dtype, seed=rank + 7)
    path = tmp_path / "a.zarr"
    write(path, data, chunks, zarr_format=2, compressors=V2_COMPRESSORS[compressor])
    array = open_array(str(path))
    assert array.zarr_format == 2
    assert array.batched_algorithm is not None, array.fallback_reason
    np.testing.assert_array_equal(check(path), data)
    check(path, (..., slice(2, None, 3)))


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        (
            "v2 order F, shuffle",
            {
                "zarr_format": 2,
                "order": "F",
                "filters": [numcodecs.Shuffle(elementsize=4)],
                "compressors": numcodecs.Zstd(),
            },
        ),
        (
            "v3 transpose, uncompressed",
            {
                "serializer": zarr.codecs.BytesCodec(),
                "filters": [zarr.codecs.TransposeCodec(order=(1, 0))],
                "compressors": None,
            },
        ),
    ],
)
def test_fallback_chains_read_like_zarr(tmp_path, name, kwargs):
    data = sample((19, 30), "int32", seed=3)
    path = tmp_path / "a.zarr"
    write(path, data, (4, 7), **kwargs)
    array = open_array(str(path))
    assert array.batched_algorithm is None
    assert array.fallback_reason
    np.testing.assert_array_equal(check(path), data)
    check(path, (slice(3, 17, 2), -1))


def test_sharded_arrays_of_batched_chains_read_in_batches_like_zarr(tmp_path):
    data = sample((19, 30), "int32", seed=3)
    path = tmp_path / "a.zarr"
    write(path, data, (4, 7), shards=(8, 14), compressors=zarr.codecs.ZstdCodec(level=1))
    assert open_array(str(path)).batched_algorithm == "zstd"
    np.testing.assert_array_equal(check(path), data)
    check(path, (slice(3, 17, 2), -1))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_missing_chunks_read_as_fill_value(tmp_path, zarr_format):
    path = tmp_path / "a.zarr"
    z = zarr.create_array(
        str(path), shape=(30, 40), chunks=(7, 9), dtype="float32", fill_value=-2.5,
        zarr_format=zarr_format,
    )  # fmt: skip
    z[3:12, 20:31] = np.arange(99, dtype="float32").reshape(9, 11)
    got = check(path)
    assert got[0, 0] == -2.5 and got[29, 39] == -2.5
    check(path, (slice(5, 25), slice(None, None, -3)))


SELECTIONS = [
    (),
    ...,
    0,
    -1,
    (2, 3),
    (slice(1, 8), slice(3, 9), slice(0, 11)),
    (slice(None, None, 2), ..., slice(1, None, 3)),
    (slice(None, None, -1),),
    (slice(-2, 0, -3), 4, ...),
    (..., -1),
    (-9, -10, -11),
    (slice(4, 2),),
    (slice(3, 3), slice(None)),
    (1, slice(100, 200)),
    (slice(-100, 100), slice(None, 1)),
    np.int64(3),
    (Ellipsis, np.uint8(2), slice(None)),
]


@pytest.mark.parametrize("selection", SELECTIONS, ids=repr)
def test_selections_match_numpy(tmp_path, selection):
    data = sample((9, 10, 11), "int16", seed=11)
    path = tmp_path / "a.zarr"
    write(path, data, (4, 3, 5))
    got = read_chunks_parallel(str(path), selection, device="cpu")
    want = data[selection]
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, expected(path, selection))


def test_array_object(tmp_path):
    data = sample((12, 13), "uint16", seed=5)
    path = tmp_path / "a.zarr"
    write(path, data, (5, 5), compressors=zarr.codecs.GzipCodec(level=1))
    array = open_array(path)
    assert array.shape == (12, 13) and array.ndim == 2 and len(array) == 12
    assert array.dtype == np.uint16 and array.chunks == (5, 5)
    assert [c["name"] for c in array.codecs] == ["bytes", "gzip"]
    assert array.batched_algorithm == "gzip"
    # No GPU here or with no CuPy: device=None reads to host memory.
    if zarrs_nvcomp.gpu_available() is False or zarrs_nvcomp._buffers.cupy_module() is None:
        np.testing.assert_array_equal(array[2:9, ::4], data[2:9, ::4])
    np.testing.assert_array_equal(array.read((slice(None), -2), device="cpu"), data[:, -2])
    np.testing.assert_array_equal(np.asarray(array), data)
    assert read_chunks_parallel(array, 3, device="cpu").shape == (13,)
    v2 = tmp_path / "b.zarr"
    write(v2, data, (5, 5), zarr_format=2, compressors=numcodecs.LZ4())
    assert open_array(f"file://{v2}").codecs == [{"id": "lz4", "acceleration": 1}]


@pytest.mark.parametrize(
    "selection",
    [12, -13, (0, 13), (slice(None), -14), (0, 0, 0), (..., ...), (None,), ([1, 2],), (True,), 1.5],
    ids=repr,
)
def test_bad_selections_raise_index_error(tmp_path, selection):
    path = tmp_path / "a.zarr"
    write(path, sample((12, 13), "int8"), (5, 5))
    with pytest.raises(IndexError):
        read_chunks_parallel(str(path), selection, device="cpu")


def test_corrupt_chunk_error_names_the_key(tmp_path):
    path = tmp_path / "a.zarr"
    data = sample((20, 20), "float64")
    write(path, data, (10, 10))
    chunk = path / "c" / "1" / "0"
    chunk.write_bytes(b"not zstd at all" * 5)
    with pytest.raises(DecodeError, match="c/1/0"):
        read_chunks_parallel(str(path), device="cpu")
    # Reads that do not touch the chunk still work.
    np.testing.assert_array_equal(read_chunks_parallel(path, slice(0, 10), device="cpu"), data[:10])


def test_max_decoded_size_option(tmp_path):
    path = tmp_path / "a.zarr"
    data = sample((20, 20), "float64")
    write(path, data, (10, 10))  # chunks of 800 bytes
    with pytest.raises(DecodeError, match=r"limit of 799 bytes.*max_decoded_size=") as info:
        read_chunks_parallel(str(path), device="cpu", max_decoded_size=799)
    assert "read_chunks_parallel(..., max_decoded_size=...)" in str(info.value)
    got = read_chunks_parallel(str(path), device="cpu", max_decoded_size=800)
    np.testing.assert_array_equal(got, data)
    np.testing.assert_array_equal(open_array(path).read(device="cpu", max_decoded_size=800), data)


def test_corrupt_chunk_v2_names_the_key(tmp_path):
    path = tmp_path / "a.zarr"
    write(path, sample((20, 20), "int32"), (10, 10), zarr_format=2, compressors=numcodecs.Zlib())
    (path / "0.1").write_bytes((path / "0.1").read_bytes()[:-9])
    with pytest.raises(DecodeError, match=r"0\.1"):
        read_chunks_parallel(str(path), device="cpu")


def test_store_errors(tmp_path):
    with pytest.raises(OSError):
        read_chunks_parallel(str(tmp_path / "missing.zarr"), device="cpu")
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(StoreError, match="cannot open the array"):
        open_array(str(tmp_path / "empty.zarr"))
    with pytest.raises(ValueError):
        open_array("s3://bucket/a.zarr", storage_options={"no_such_option": "1"})
    path = tmp_path / "a.zarr"
    write(path, sample((4,), "int8"), (2,))
    with pytest.raises(ValueError, match="invalid device"):
        read_chunks_parallel(str(path), device="tpu")


def test_cuda_without_gpu_raises(tmp_path):
    if zarrs_nvcomp.gpu_available():
        pytest.skip("a GPU is usable")
    path = tmp_path / "a.zarr"
    write(path, sample((4,), "int8"), (2,))
    with pytest.raises(zarrs_nvcomp.GpuUnavailableError):
        read_chunks_parallel(str(path), device="cuda")


# --- S3 through moto's server -------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_s3_reads_like_zarr(tmp_path, moto_endpoint, zarr_format):
    endpoint, client = moto_endpoint
    data = sample((30, 41), "float32", seed=zarr_format)
    local = tmp_path / "a.zarr"
    z = zarr.create_array(
        str(local), shape=data.shape, chunks=(8, 10), dtype=data.dtype, fill_value=0,
        zarr_format=zarr_format,
    )  # fmt: skip
    z[:24] = data[:24]  # the last row of chunks is missing
    upload(client, local, "bucket", f"v{zarr_format}/a.zarr")
    url = f"s3://bucket/v{zarr_format}/a.zarr"
    want = expected(local)
    got = read_chunks_parallel(url, storage_options=s3_options(endpoint), device="cpu")
    np.testing.assert_array_equal(got, want)
    array = open_array(url, storage_options=s3_options(endpoint))
    sel = (slice(29, 3, -2), slice(5, 33))
    np.testing.assert_array_equal(array.read(sel, device="cpu"), want[sel])
    with pytest.raises(StoreError):
        open_array("s3://bucket/nothing.zarr", storage_options=s3_options(endpoint))


# --- GPU ----------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_gpu_reads_like_zarr_and_the_cpu_path(tmp_path, dtype, zarr_format):
    cp = cupy_or_skip()
    shape, chunks = SHAPES[DTYPES.index(dtype) % len(SHAPES)]
    data = sample(shape, dtype, seed=1)
    path = tmp_path / "a.zarr"
    compressors = numcodecs.Zstd() if zarr_format == 2 else zarr.codecs.ZstdCodec()
    write(path, data, chunks, zarr_format=zarr_format, compressors=compressors)
    for selection in [..., tuple(slice(1, None, 2) for _ in shape), (-1, ...)]:
        got = read_chunks_parallel(str(path), selection, device="cuda")
        assert isinstance(got, cp.ndarray)
        cpu = read_chunks_parallel(str(path), selection, device="cpu")
        assert got.shape == cpu.shape and got.dtype == cpu.dtype
        np.testing.assert_array_equal(cp.asnumpy(got), cpu)
        np.testing.assert_array_equal(cp.asnumpy(got), expected(path, selection))


@pytest.mark.gpu
def test_gpu_default_device_and_lifetime(tmp_path):
    cp = cupy_or_skip()
    data = sample((64, 64), "float32")
    path = tmp_path / "a.zarr"
    write(path, data, (16, 16), shards=(32, 32))  # the zarrs pipeline, then uploaded
    got = open_array(path)[5:60]
    assert isinstance(got, cp.ndarray)
    view = got[3:]
    del got  # the view keeps the reader's device memory alive
    np.testing.assert_array_equal(cp.asnumpy(view), data[8:60])
    cai = read_chunks_parallel(str(path), device="cuda").__cuda_array_interface__
    assert cai["shape"] == (64, 64) and cai["typestr"] == "<f4" and cai["version"] == 3


# --- make demo, the benchmark -------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--size-mb", "4", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert "results identical" in out and "GB/s" in out


def test_read_bench_runs(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benches" / "read_bench.py"),
            "--size-mb",
            "2",
            "--repeats",
            "1",
            "--dir",
            str(tmp_path),
            "--cpu",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert out.count("ours cpu") == 4, out
