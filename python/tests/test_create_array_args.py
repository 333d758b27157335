"""create_array takes zarr's spellings (``compressors=``, ``data=``,
``chunks="auto"``, zarr codec objects, ``"blosc"``) and refuses arguments of
the wrong kind or range with the package's errors, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import InvalidArgumentError, UnsupportedTypeError
from zarrs_nvcomp._create_args import AUTO_CHUNK_BYTES, auto_chunks


def _compressor_of(path) -> dict:
    meta = zarr.open_array(str(path), mode="r").metadata.to_dict()
    return meta["codecs"][-1]


@pytest.mark.parametrize(
    "compressors",
    [
        zarr.codecs.ZstdCodec(level=3),
        [zarr.codecs.ZstdCodec(level=3)],
        ({"name": "zstd", "configuration": {"level": 3, "checksum": False}},),
    ],
    ids=["codec", "list", "tuple-of-metadata"],
)
def test_compressors_takes_zarr_codecs_one_or_a_list_of_one(tmp_path, compressors):
    path = tmp_path / "a.zarr"
    data = np.arange(60, dtype="int32").reshape(6, 10)
    zarrs_nvcomp.create_array(str(path), data=data, chunks=(3, 5), compressors=compressors)
    assert _compressor_of(path) == {
        "name": "zstd",
        "configuration": {"level": 3, "checksum": False},
    }
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[:], data)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", ["uint8", "float64"])
def test_blosc_by_name_and_zarr_blosc_codec_write_what_zarr_reads(tmp_path, zarr_format, dtype):
    data = np.arange(1000).astype(dtype)
    for i, compressors in enumerate(["blosc", zarr.codecs.BloscCodec()]):
        if zarr_format == 2 and i == 1:
            continue  # zarr's v3 codec object has no v2 form, in zarr either
        path = tmp_path / f"{i}.zarr"
        zarrs_nvcomp.create_array(
            str(path), data=data, chunks=(100,), compressors=compressors, zarr_format=zarr_format
        )
        back = zarr.open_array(str(path), mode="r")
        np.testing.assert_array_equal(back[:], data)
        assert "blosc" in str(back.metadata.to_dict())


def test_compressor_keeps_working_and_none_means_uncompressed(tmp_path):
    a = zarrs_nvcomp.create_array(
        str(tmp_path / "a.zarr"), shape=(4,), dtype="i2", chunks=(2,), compressor="gzip"
    )
    assert _compressor_of(tmp_path / "a.zarr")["name"] == "gzip"
    b = zarrs_nvcomp.create_array(
        str(tmp_path / "b.zarr"), shape=(4,), dtype="i2", chunks=(2,), compressors=[]
    )
    assert _compressor_of(tmp_path / "b.zarr")["name"] == "bytes"
    a[:] = b[:] = 7
    assert (a[:] == 7).all() and (b[:] == 7).all()


def test_data_gives_shape_and_dtype_and_is_written(tmp_path):
    data = np.random.default_rng(1).standard_normal((37, 11)).astype("float32")
    array = zarrs_nvcomp.create_array(str(tmp_path / "d.zarr"), data=data, chunks=(8, 8))
    assert array.shape == (37, 11) and array.dtype == np.float32
    np.testing.assert_array_equal(array[...], data)
    cast = zarrs_nvcomp.create_array(
        str(tmp_path / "e.zarr"), data=[[1, 2], [3, 4]], dtype="uint8", chunks=1
    )
    assert cast.dtype == np.uint8 and cast.shape == (2, 2)
    np.testing.assert_array_equal(cast[...], [[1, 2], [3, 4]])


def test_data_of_another_shape_than_shape_is_refused_before_creating(tmp_path):
    path = tmp_path / "x.zarr"
    with pytest.raises(InvalidArgumentError, match="shape"):
        zarrs_nvcomp.create_array(str(path), data=np.zeros(4), shape=(5,))
    assert not path.exists()


def test_an_integer_shape_is_one_dimension(tmp_path):
    array = zarrs_nvcomp.create_array(str(tmp_path / "i.zarr"), shape=10, dtype="i4", chunks=4)
    assert array.shape == (10,)


def test_auto_chunks_hold_2_to_4_mib_and_cover_small_arrays_whole(tmp_path):
    assert auto_chunks([10, 20], 8) == [10, 20]
    assert auto_chunks([0, 5], 4) == [1, 5]
    for shape, itemsize in [([4096, 4096], 4), ([10**6], 8), ([3, 5000, 7000], 2)]:
        chunks = auto_chunks(shape, itemsize)
        nbytes = np.prod(chunks) * itemsize
        assert AUTO_CHUNK_BYTES // 2 < nbytes <= AUTO_CHUNK_BYTES, (shape, chunks)
    array = zarrs_nvcomp.create_array(
        str(tmp_path / "auto.zarr"), shape=(4096, 4096), dtype="float32"
    )
    meta = zarr.open_array(str(tmp_path / "auto.zarr"), mode="r").metadata.to_dict()
    assert list(meta["chunk_grid"]["configuration"]["chunk_shape"]) == [1024, 1024]
    assert array.shape == (4096, 4096)


BAD = [
    ({"shape": "1"}, UnsupportedTypeError, "shape"),
    ({"shape": (2, "3")}, UnsupportedTypeError, "shape"),
    ({"shape": (True,)}, UnsupportedTypeError, "shape"),
    ({"shape": -1}, InvalidArgumentError, "shape"),
    ({"shape": 2**64}, InvalidArgumentError, "shape"),
    ({"shape": 1.5}, UnsupportedTypeError, "shape"),
    ({"shape": None}, InvalidArgumentError, "shape"),
    ({"chunks": 0}, InvalidArgumentError, "chunks"),
    ({"chunks": "big"}, UnsupportedTypeError, "chunks"),
    ({"chunks": {"a": 1}}, UnsupportedTypeError, "chunks"),
    ({"shards": [2**70]}, InvalidArgumentError, "shards"),
    ({"shards": (4, 4)}, InvalidArgumentError, "auto"),
    ({"dtype": None}, InvalidArgumentError, "dtype"),
    ({"dtype": "nope"}, UnsupportedTypeError, "dtype"),
    ({"dtype": 3}, UnsupportedTypeError, "dtype"),
    ({"dtype": "U4"}, UnsupportedTypeError, "numbers"),
    ({"fill_value": 2**70}, InvalidArgumentError, "fill_value"),
    ({"fill_value": "x"}, InvalidArgumentError, "fill_value"),
    ({"fill_value": [1, 2]}, InvalidArgumentError, "fill_value"),
    ({"zarr_format": "3"}, InvalidArgumentError, "zarr_format"),
    ({"zarr_format": True}, InvalidArgumentError, "zarr_format"),
    ({"zarr_format": 4}, InvalidArgumentError, "zarr_format"),
    ({"overwrite": "yes"}, UnsupportedTypeError, "overwrite"),
    ({"compressors": ["zstd", "gzip"]}, InvalidArgumentError, "one compressor"),
    ({"compressors": "zstd", "compressor": "gzip"}, InvalidArgumentError, "not both"),
    ({"compressors": 3}, UnsupportedTypeError, "compressor"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), BAD, ids=lambda v: repr(v)[:40])
def test_bad_arguments_raise_the_packages_errors_naming_them(tmp_path, kwargs, error, match):
    path = tmp_path / "bad.zarr"
    args = {"shape": (8, 8), "dtype": "int16"} | kwargs
    with pytest.raises(error, match=match):
        zarrs_nvcomp.create_array(str(path), **args)
    assert not path.exists()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_compressors_auto_is_the_default_compressor(tmp_path, zarr_format):
    data = np.arange(100, dtype="f4")
    auto = zarrs_nvcomp.create_array(
        str(tmp_path / "auto.zarr"), data=data, compressors="auto", zarr_format=zarr_format
    )
    default = zarrs_nvcomp.create_array(
        str(tmp_path / "default.zarr"), data=data, zarr_format=zarr_format
    )
    assert auto.codecs == default.codecs and "zstd" in str(auto.codecs), auto.codecs
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "auto.zarr"))[...], data)
