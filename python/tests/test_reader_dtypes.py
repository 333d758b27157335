"""Every fixed-size data type zarr-python writes, read by the reader (on the
CPU) and compared element by element with zarr-python's own read, in zarr v2
and v3: datetime64/timedelta64 of every unit, fixed-width bytes (S), unicode
(U) and void (V); variable-size types fail at open with one TypeError naming
the data type. (test_reader.py covers the numeric types.)"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import zarr
from zarr.core.dtype import VariableLengthBytes

from zarrs_nvcomp import open_array, read_chunks_parallel

UNITS = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
FIXED = [
    *(f"M8[{u}]" for u in UNITS),
    *(f"m8[{u}]" for u in UNITS),
    "M8[10s]",
    "m8[25ms]",
    "S1",
    "S7",
    "U1",
    "U6",
    "V3",
    "V16",
]


def sample(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind in "Mm":
        # Small enough for every unit; NaT included.
        values = rng.integers(-(10**6), 10**6, size=n).astype(dtype)
        values[::11] = np.array("NaT", dtype=dtype)
        return values
    if dtype.kind == "U":
        points = rng.choice(
            [0x41, 0x7A, 0xE9, 0x3B1, 0x4E2D, 0x1F600], size=(n, dtype.itemsize // 4)
        )
        # Shorter strings too: the rest of the element is zeros.
        points[::3, -1] = 0
        return np.frombuffer(points.astype("<u4").tobytes(), dtype=dtype.newbyteorder("<"))
    raw = rng.integers(0, 256, size=(n, dtype.itemsize), dtype=np.uint8)
    if dtype.kind == "S":
        raw[::3, -1] = 0
    return np.frombuffer(raw.tobytes(), dtype=dtype)


def write(path, data, chunks, zarr_format, dtype=None, **kwargs) -> None:
    with warnings.catch_warnings():
        # zarr-python warns that these types are not in the zarr v3 spec.
        warnings.simplefilter("ignore")
        z = zarr.create_array(
            str(path),
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype if dtype is None else dtype,
            zarr_format=zarr_format,
            **kwargs,
        )
        z[...] = data


def zarr_read(path, selection=...) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(zarr.open_array(str(path), mode="r")[...])[selection]


def assert_reads_like_zarr(path, selection=...) -> None:
    got = read_chunks_parallel(str(path), selection, device="cpu")
    want = zarr_read(path, selection)
    assert got.dtype == want.dtype and got.shape == want.shape
    # Element by element, bytes included (NaT != NaT, and S/U compare stripped).
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", FIXED)
def test_fixed_size_types_read_like_zarr(tmp_path, dtype, zarr_format):
    dtype = np.dtype(dtype)
    data = sample(dtype, 6 * 7, seed=len(FIXED) * zarr_format).reshape(6, 7)
    path = tmp_path / "a.zarr"
    write(path, data, (4, 3), zarr_format)
    array = open_array(str(path))
    assert array.dtype == dtype, array
    assert array.batched_algorithm is not None, array.fallback_reason
    assert_reads_like_zarr(path)
    assert_reads_like_zarr(path, (slice(1, 5), slice(2, None, 2)))
    # zarr-python kept every byte: the data compared with is the data written.
    assert zarr_read(path).tobytes() == data.tobytes()


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    ("dtype", "fill_value"),
    [
        ("M8[ms]", np.datetime64("2001-02-03", "ms")),
        ("m8[h]", np.timedelta64(-5, "h")),
        ("S4", b"ab"),
        ("U3", "xé"),
        ("V2", b"\x01\x02"),
    ],
)
def test_missing_chunks_read_as_the_fill_value(tmp_path, dtype, fill_value, zarr_format):
    dtype = np.dtype(dtype)
    path = tmp_path / "a.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(
            str(path),
            shape=(10,),
            chunks=(3,),
            dtype=dtype,
            fill_value=fill_value,
            zarr_format=zarr_format,
        )
        z[:3] = sample(dtype, 3, seed=1)
    assert_reads_like_zarr(path)
    assert read_chunks_parallel(str(path), 9, device="cpu") == np.array(fill_value, dtype=dtype)


@pytest.mark.parametrize("dtype", ["M8[ns]", "S5", "U2"])
def test_fixed_size_types_through_the_zarrs_pipeline(tmp_path, dtype):
    dtype = np.dtype(dtype)
    data = sample(dtype, 8 * 9, seed=5).reshape(8, 9)
    path = tmp_path / "a.zarr"
    # Sharded arrays of a batched inner chain read in batches; compressing
    # the shards as a whole keeps this one on the zarrs pipeline.
    write(
        path, data, (4, 3), 3,
        serializer=zarr.codecs.ShardingCodec(chunk_shape=(4, 3)),
        compressors=zarr.codecs.ZstdCodec(level=1),
    )  # fmt: skip
    assert open_array(str(path)).batched_algorithm is None
    assert_reads_like_zarr(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    ("dtype", "name"), [(str, "string"), (VariableLengthBytes(), "bytes")], ids=["str", "bytes"]
)
def test_variable_size_types_fail_at_open_with_a_type_error(tmp_path, dtype, name, zarr_format):
    path = tmp_path / "a.zarr"
    # zarr-python's variable-length strings and bytes.
    values = ["a", "bcd", "", "é"] if dtype is str else [b"a", b"bc", b"", b"ef"]
    write(path, np.array(values, dtype=object), (2,), zarr_format, dtype=dtype)
    # zarr v2 stores both as the object type |O.
    name = name if zarr_format == 3 else re.escape("|O")
    with pytest.raises(TypeError, match=f"data type [^:]*{name}.* variable size"):
        open_array(str(path))


def test_data_types_zarrs_lacks_fail_at_open_with_a_type_error(tmp_path):
    path = tmp_path / "a.zarr"
    data = np.zeros(4, dtype=[("a", "<i4"), ("b", "<f8")])
    write(path, data, (2,), 3)
    with pytest.raises(TypeError, match="data type structured"):
        open_array(str(path))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["M8[ns]", "S3", "U2"])
def test_default_device_reads_types_cupy_lacks_on_the_host(tmp_path, dtype):
    pytest.importorskip("cupy", reason="CuPy is not installed")
    dtype = np.dtype(dtype)
    path = tmp_path / "a.zarr"
    write(path, sample(dtype, 20, seed=2), (6,), 3)
    got = read_chunks_parallel(str(path))
    assert isinstance(got, np.ndarray)
    assert got.tobytes() == zarr_read(path).tobytes()
