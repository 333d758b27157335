"""``zarrs_nvcomp.Array`` in zarr's words: ``fill_value``, ``attrs`` (read and
written in the store, as zarr does), ``nbytes_stored()`` and ``info``, each
compared with what zarr-python says of the same array."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zarrs_nvcomp

zarr = pytest.importorskip("zarr")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    ("dtype", "fill_value"),
    [
        ("int16", -7),
        ("uint8", 0),
        ("float32", 1.5),
        ("float64", math.nan),
        ("bool", True),
        ("complex64", 1 - 2j),
    ],
)
def test_fill_value_is_zarrs(tmp_path, zarr_format, dtype, fill_value):
    path = str(tmp_path / "a.zarr")
    zarr.create_array(
        path, shape=(6,), chunks=(2,), dtype=dtype, fill_value=fill_value, zarr_format=zarr_format
    )
    got = zarrs_nvcomp.open_array(path).fill_value
    expected = zarr.open_array(path).fill_value
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_equal(got, expected)
    # What a missing chunk reads as.
    np.testing.assert_equal(zarrs_nvcomp.open_array(path)[0], got)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attrs_read_and_write_as_zarrs(tmp_path, zarr_format):
    path = str(tmp_path / "a.zarr")
    zarr.create_array(
        path, shape=(4,), dtype="i4", attributes={"units": "K"}, zarr_format=zarr_format
    )
    array = zarrs_nvcomp.open_array(path)
    assert (
        dict(array.attrs) == {"units": "K"}
        and array.attrs["units"] == "K"
        and len(array.attrs) == 1
    )
    array.attrs["scale"] = [1, 2.5, None]
    array.attrs.update({"long_name": "temperature"}, valid=True)
    stored = zarr.open_array(path).attrs.asdict()
    assert stored == {
        "units": "K",
        "scale": [1, 2.5, None],
        "long_name": "temperature",
        "valid": True,
    }
    assert array.attrs.asdict() == stored == zarrs_nvcomp.open_array(path).attrs.asdict()
    del array.attrs["units"]
    assert "units" not in zarr.open_array(path).attrs
    array.attrs.put({"only": 1})
    assert zarr.open_array(path).attrs.asdict() == {"only": 1}
    # The rest of the metadata is kept: zarr reads the array as before.
    assert zarr.open_array(path).shape == (4,) and zarr.open_array(path).dtype == np.dtype("i4")
    assert array.metadata["attributes"] == {"only": 1}


def test_attrs_of_a_memory_store_and_a_read_only_array(tmp_path):
    array = zarrs_nvcomp.create_array("memory://vocabulary-attrs", shape=(3,), dtype="u1")
    array.attrs["a"] = 1
    assert zarrs_nvcomp.open_array("memory://vocabulary-attrs").attrs["a"] == 1
    path = str(tmp_path / "r.zarr")
    zarr.create_array(path, shape=(3,), dtype="u1", attributes={"k": 1})
    read_only = zarrs_nvcomp.open_array(path, mode="r")
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="mode='r'"):
        read_only.attrs["k"] = 2
    assert zarr.open_array(path).attrs["k"] == 1


def test_attributes_that_json_cannot_hold_are_refused(tmp_path):
    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, shape=(3,), dtype="u1")
    array = zarrs_nvcomp.open_array(path)
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="JSON"):
        array.attrs["bad"] = object()
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="strings"):
        array.attrs.put({1: "x"})
    assert dict(zarr.open_array(path).attrs) == {}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nbytes_stored_is_zarrs(tmp_path, zarr_format):
    path = str(tmp_path / "a.zarr")
    z = zarr.create_array(
        path, shape=(100, 10), chunks=(10, 10), dtype="f8", zarr_format=zarr_format
    )
    z[:35] = np.arange(350).reshape(35, 10)  # 4 of 10 chunks stored
    assert zarrs_nvcomp.open_array(path).nbytes_stored() == zarr.open_array(path).nbytes_stored()


def test_info_summarises_the_array(tmp_path):
    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, shape=(8, 4), chunks=(4, 4), dtype="f4", fill_value=2.0)
    text = repr(zarrs_nvcomp.open_array(path).info)
    for row in [
        "Zarr format : 3",
        "Data type   : float32",
        "Fill value  : 2.0",
        "Shape       : (8, 4)",
    ]:
        assert row in text, text
    assert "Chunk shape : (4, 4)" in text and "No. bytes   : 128" in text


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_array_stores_attributes_as_zarr_does(tmp_path, zarr_format):
    path = str(tmp_path / "a.zarr")
    attributes = {"units": "m/s", "scale": [0.5, None], "nested": {"a": True}}
    array = zarrs_nvcomp.create_array(
        path, shape=(4,), dtype="f4", attributes=attributes, zarr_format=zarr_format
    )
    assert array.attrs.asdict() == attributes
    assert zarr.open_array(path).attrs.asdict() == attributes


def test_create_array_stores_dimension_names_as_zarr_does(tmp_path):
    path = str(tmp_path / "a.zarr")
    zarrs_nvcomp.create_array(path, shape=(3, 4), dtype="i4", dimension_names=["time", None])
    assert zarr.open_array(path).metadata.dimension_names == ("time", None)
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="each of the 2 dimensions"):
        zarrs_nvcomp.create_array(
            str(tmp_path / "b.zarr"), shape=(3, 4), dtype="i4", dimension_names=["x"]
        )
    with pytest.raises(
        zarrs_nvcomp.InvalidArgumentError, match="v2 arrays have no dimension names"
    ):
        zarrs_nvcomp.create_array(
            str(tmp_path / "c.zarr"), shape=(3,), dtype="i4", dimension_names=["x"], zarr_format=2
        )
    with pytest.raises(zarrs_nvcomp.UnsupportedTypeError):
        zarrs_nvcomp.create_array(
            str(tmp_path / "d.zarr"), shape=(3,), dtype="i4", dimension_names="x"
        )
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="JSON"):
        zarrs_nvcomp.create_array(
            str(tmp_path / "e.zarr"), shape=(3,), dtype="i4", attributes={"a": object()}
        )
    # Nothing was created by a refused call.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_resize_as_zarrs(tmp_path, zarr_format):
    # zarr-python's own test of resize, on both: shrink, then grow; the
    # chunks wholly outside the smaller shape are removed from the store.
    paths = {name: str(tmp_path / f"{name}.zarr") for name in ("ours", "zarrs")}
    data = np.arange(105 * 4, dtype="i4").reshape(105, 4)
    for path in paths.values():
        zarr.create_array(
            path, shape=data.shape, chunks=(10, 2), dtype="i4", zarr_format=zarr_format
        )[...] = data
    ours = zarrs_nvcomp.open_array(paths["ours"])
    ours.resize((35, 3))
    zarr.open_array(paths["zarrs"]).resize((35, 3))
    assert ours.shape == (35, 3) and zarr.open_array(paths["ours"]).shape == (35, 3)
    np.testing.assert_array_equal(ours[...], data[:35, :3])
    np.testing.assert_array_equal(ours[...], zarr.open_array(paths["zarrs"])[...])
    assert ours.nbytes_stored() == zarr.open_array(paths["zarrs"]).nbytes_stored()
    ours.resize((120, 4))
    zarr.open_array(paths["zarrs"]).resize((120, 4))
    np.testing.assert_array_equal(ours[...], zarr.open_array(paths["zarrs"])[...])
    np.testing.assert_array_equal(zarr.open_array(paths["ours"])[...], ours[...])


def test_resize_is_refused_for_a_read_only_array_and_a_wrong_rank(tmp_path):
    path = str(tmp_path / "a.zarr")
    zarrs_nvcomp.create_array(path, data=np.arange(10), chunks=5)
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="mode='r'"):
        zarrs_nvcomp.open_array(path, mode="r").resize(5)
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="dimensions"):
        zarrs_nvcomp.open_array(path).resize((5, 5))
    one_d = zarrs_nvcomp.open_array(path)
    one_d.resize(5)
    assert one_d.shape == (5,) and zarr.open_array(path).shape == (5,)


FILTERS = {
    "delta": lambda np_module: [np_module.Delta(dtype="<i4")],
    "fixedscaleoffset": lambda np_module: [
        np_module.FixedScaleOffset(offset=0, scale=10, dtype="<f8", astype="<i4")
    ],
    "config": lambda np_module: [{"id": "delta", "dtype": "<i4"}],
}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("filters", sorted(FILTERS))
def test_create_array_takes_zarrs_filters_and_zarr_reads_them(tmp_path, zarr_format, filters):
    numcodecs = pytest.importorskip("numcodecs")
    dtype = "f8" if filters == "fixedscaleoffset" else "i4"
    data = (np.arange(20 * 10).reshape(20, 10) % 97).astype(dtype)
    path = str(tmp_path / "a.zarr")
    array = zarrs_nvcomp.create_array(
        path, data=data, chunks=(5, 5), filters=FILTERS[filters](numcodecs), zarr_format=zarr_format
    )
    np.testing.assert_array_equal(zarr.open_array(path)[...], data)
    np.testing.assert_array_equal(array[...], data)
    # The reader decodes these filtered chains in batches.
    assert array.batched_algorithm == "zstd", array.fallback_reason


def test_create_array_takes_zarr_codecs_as_filters_in_and_out_of_shards(tmp_path):
    numcodecs = pytest.importorskip("numcodecs")
    data = np.arange(20 * 10, dtype="i4").reshape(20, 10)
    transposed = zarrs_nvcomp.create_array(
        str(tmp_path / "t.zarr"),
        data=data,
        chunks=(5, 5),
        filters=[zarr.codecs.TransposeCodec(order=(1, 0))],
    )
    sharded = zarrs_nvcomp.create_array(
        str(tmp_path / "s.zarr"),
        data=data,
        chunks=(5, 5),
        shards=(10, 10),
        filters=numcodecs.Delta(dtype="<i4"),
    )
    for array in (transposed, sharded):
        np.testing.assert_array_equal(zarr.open_array(array.url)[...], data)
        np.testing.assert_array_equal(array[...], data)
    assert sharded.codecs[0]["configuration"]["codecs"][0]["name"] == "numcodecs.delta"
    with pytest.raises(zarrs_nvcomp.UnsupportedTypeError, match="filters"):
        zarrs_nvcomp.create_array(str(tmp_path / "x.zarr"), shape=(4,), dtype="i4", filters=[3])
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError):
        zarrs_nvcomp.create_array(
            str(tmp_path / "y.zarr"), shape=(4,), dtype="i4", filters=[{"id": "no-such-filter"}]
        )
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "y.zarr").exists()
