"""The package's exceptions: one base, the old built-in bases kept, and one device parser."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import zarrs_nvcomp
from zarrs_nvcomp import NvCompBatchCodec, ZarrsNvcompError

# Each public exception and the built-in class callers caught before the base existed.
OLD_BASES = {
    "DecodeError": RuntimeError,
    "GpuUnavailableError": RuntimeError,
    "CudaError": RuntimeError,
    "StoreError": OSError,
    "StoreTimeoutError": TimeoutError,
    "InvalidArgumentError": ValueError,
    "UnsupportedTypeError": TypeError,
    "SelectionError": IndexError,
    "OutOfMemoryError": MemoryError,
    # As zarr's classes of these names.
    "ContainsArrayError": ValueError,
    "ContainsGroupError": ValueError,
    "ArrayNotFoundError": FileNotFoundError,
    "NodeTypeValidationError": OSError,
}


def public_exceptions() -> dict[str, type]:
    return {
        name: obj
        for name in zarrs_nvcomp.__all__
        if inspect.isclass(obj := getattr(zarrs_nvcomp, name))
        and issubclass(obj, BaseException)
        and not issubclass(obj, Warning)
    }


def test_every_public_exception_derives_from_the_base_and_its_old_base():
    found = public_exceptions()
    assert set(found) == set(OLD_BASES) | {"ZarrsNvcompError"}
    assert ZarrsNvcompError.__module__ == "zarrs_nvcomp"
    for name, cls in found.items():
        assert issubclass(cls, ZarrsNvcompError), name
        if name != "ZarrsNvcompError":
            assert issubclass(cls, OLD_BASES[name]), name
            assert cls.__doc__, name


def test_a_decode_error_is_caught_by_the_base():
    codec = NvCompBatchCodec("zstd", device="cpu")
    with pytest.raises(ZarrsNvcompError) as caught:
        codec.decode_batch([codec.encode(b"a" * 100), b"not a zstd frame"])
    assert isinstance(caught.value, zarrs_nvcomp.DecodeError)
    assert "buffer 1" in str(caught.value)


def test_a_store_error_is_caught_by_the_base(tmp_path):
    with pytest.raises(ZarrsNvcompError) as caught:
        zarrs_nvcomp.open_array(tmp_path / "missing.zarr")
    assert isinstance(caught.value, zarrs_nvcomp.StoreError)
    assert isinstance(caught.value, OSError)


@pytest.mark.parametrize(
    "make",
    [
        lambda: NvCompBatchCodec("lz5"),
        lambda: NvCompBatchCodec("lz4", device="tpu"),
        lambda: NvCompBatchCodec("lz4", {"no_such_option": 1}),
        lambda: NvCompBatchCodec("lz4", device="cpu").decode_batch([b"x"], out=[]),
        lambda: NvCompBatchCodec("lz4", device="cpu").decode_batch(
            [b"x"], out=[np.zeros(4, np.uint8)[::2]]
        ),
    ],
)
def test_a_bad_argument_is_caught_by_the_base_and_is_a_value_error(make):
    with pytest.raises(ZarrsNvcompError) as caught:
        make()
    assert isinstance(caught.value, zarrs_nvcomp.InvalidArgumentError)
    assert isinstance(caught.value, ValueError)


def test_a_bad_selection_is_an_index_error_of_the_package(tmp_path):
    zarr = pytest.importorskip("zarr")
    zarr.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype="u1")
    with pytest.raises(IndexError) as caught:
        zarrs_nvcomp.open_array(tmp_path / "a.zarr")[7]
    assert isinstance(caught.value, zarrs_nvcomp.SelectionError)


@pytest.mark.parametrize(
    ("name", "parsed"),
    [("cpu", "cpu"), (" CPU ", "cpu"), ("cuda", "cuda:0"), ("GPU", "cuda:0"), ("cuda:3", "cuda:3")],
)
def test_one_device_parser(name, parsed):
    from zarrs_nvcomp._zarrs_nvcomp import parse_device

    assert parse_device(name) == parsed
    assert parse_device("auto") == "auto"


@pytest.mark.parametrize("name", ["tpu", "cuda:", "cuda:-1", "cuda:x"])
def test_bad_device_names_are_rejected_alike_by_codec_and_reader(name, tmp_path):
    zarr = pytest.importorskip("zarr")
    zarr.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype="u1")
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError) as codec_error:
        NvCompBatchCodec("lz4", device=name)
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError) as reader_error:
        zarrs_nvcomp.read_chunks_parallel(tmp_path / "a.zarr", device=name)
    assert str(codec_error.value) == str(reader_error.value)
    assert "cuda:N" in str(codec_error.value)
