"""Arguments and storage options of the wrong kind or out of range: each is an
error of the package that names what was wrong, never a built-in error, a
panic, a spin or an overflow."""

from __future__ import annotations

import datetime
import time

import numpy as np
import pytest

import zarrs_nvcomp
from zarrs_nvcomp import (
    InvalidArgumentError,
    NvCompBatchCodec,
    SelectionError,
    UnsupportedTypeError,
    ZarrsNvcompError,
    open_array,
    read_chunks_parallel,
    write_chunks_parallel,
)

DATA = np.arange(64, dtype="f4").reshape(8, 8)


@pytest.fixture
def url(tmp_path) -> str:
    url = str(tmp_path / "a.zarr")
    zarrs_nvcomp.create_array(url, shape=(8, 8), dtype="f4", chunks=(4, 4))
    write_chunks_parallel(url, DATA)
    return url


# --- storage options --------------------------------------------------------

BAD_OPTION_VALUES = [
    ("timeout", "NaN"),
    ("timeout", "-1"),
    ("timeout", "soon"),
    ("timeout", float("nan")),
    ("timeout", float("-inf")),
    ("connect_timeout", "inf"),
    ("read_timeout", ""),
    ("retry_timeout", "-5s"),
    ("max_retries", "-1"),
    ("max_retries", "1.5"),
    ("max_retries", "many"),
    ("allow_http", "maybe"),
    ("http2_max_frame_size", "1"),
    ("pool_max_idle_per_host", "-2"),
]


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize(("key", "value"), BAD_OPTION_VALUES)
def test_invalid_storage_option_values_name_the_option(url, where, key, value):
    # Refused before any request: the bucket is never asked for.
    target = url if where == "local" else "s3://bucket/a.zarr"
    with pytest.raises(InvalidArgumentError, match=key):
        open_array(target, storage_options={key: value})


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": "604800"},
        {"timeout": "168h", "max_retries": "0"},
        {"retry_timeout": datetime.timedelta(days=7)},
        {"max_retries": "1000"},
    ],
)
def test_longest_durations_and_counts_are_taken(url, options):
    started = time.monotonic()
    array = open_array(url, storage_options=options)
    np.testing.assert_array_equal(array.read(device="cpu"), DATA)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("key", "value", "range_"),
    [
        ("timeout", "1e300", "604800 s"),
        ("timeout", 1e300, "604800 s"),
        ("connect_timeout", "1e300m", "604800 s"),
        ("pool_idle_timeout", "9e99h", "604800 s"),
        ("retry_timeout", "169h", "604800 s"),
        ("timeout", datetime.timedelta(days=10**6), "604800 s"),
        ("max_retries", "1001", "1000"),
        ("max_retries", "99999999999", "1000"),
    ],
)
def test_durations_and_counts_past_their_range_name_it(url, key, value, range_):
    # Taken as the maximum, they hid a typo: 62 s of retries against a dead endpoint.
    with pytest.raises(InvalidArgumentError, match=rf"{key}.*{range_}"):
        open_array(url, storage_options={key: value})


@pytest.mark.parametrize("options", [["timeout", "1s"], "timeout=1s", 5])
def test_storage_options_of_the_wrong_kind(url, options):
    with pytest.raises(UnsupportedTypeError, match="storage_options"):
        open_array(url, storage_options=options)
    with pytest.raises(UnsupportedTypeError, match="storage_options"):
        read_chunks_parallel(url, storage_options=options)


def test_storage_option_names_and_values_of_the_wrong_kind(url):
    with pytest.raises(UnsupportedTypeError, match="'timeout'"):
        open_array(url, storage_options={"timeout": None})
    with pytest.raises(UnsupportedTypeError, match="'timeout'"):
        open_array(url, storage_options={"timeout": ["1s"]})
    with pytest.raises(UnsupportedTypeError, match="names"):
        open_array(url, storage_options={1: "1s"})
    array = open_array(url, storage_options={"timeout": datetime.timedelta(seconds=3)})
    np.testing.assert_array_equal(array.read(device="cpu"), DATA)


# --- keyword arguments -------------------------------------------------------

BAD_READ_ARGUMENTS = [
    ("max_decoded_size", -1, InvalidArgumentError),
    ("max_decoded_size", "x", UnsupportedTypeError),
    ("max_decoded_size", 2**70, InvalidArgumentError),
    ("max_decoded_size", 1.5, UnsupportedTypeError),
    ("max_concurrent_requests", -1, InvalidArgumentError),
    ("max_concurrent_requests", 2**70, InvalidArgumentError),
    ("trusted_input", "yes", UnsupportedTypeError),
    ("trusted_input", 1, UnsupportedTypeError),
]


@pytest.mark.parametrize(("name", "value", "error"), BAD_READ_ARGUMENTS)
def test_bad_read_arguments_name_the_argument(url, name, value, error):
    with pytest.raises(error, match=name):
        open_array(url).read(device="cpu", **{name: value})
    with pytest.raises(error, match=name):
        read_chunks_parallel(url, device="cpu", **{name: value})


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("write_empty_chunks", "no", UnsupportedTypeError),
        ("write_empty_chunks", None, UnsupportedTypeError),
        ("max_concurrent_requests", -1, InvalidArgumentError),
        ("max_concurrent_requests", "8", UnsupportedTypeError),
    ],
)
def test_bad_write_arguments_name_the_argument(url, name, value, error):
    with pytest.raises(error, match=name):
        write_chunks_parallel(url, DATA, **{name: value})


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("max_decoded_size", -5, InvalidArgumentError),
        ("max_decoded_size", 2**64, InvalidArgumentError),
        ("max_decoded_size", "1GB", UnsupportedTypeError),
        ("trusted_input", "yes", UnsupportedTypeError),
        ("options", True, UnsupportedTypeError),
        ("options", ["data_type"], UnsupportedTypeError),
    ],
)
def test_bad_codec_arguments_name_the_argument(name, value, error):
    with pytest.raises(error, match=name):
        NvCompBatchCodec("zstd", device="cpu", **{name: value})


def test_a_device_that_is_not_a_string_names_the_argument():
    with pytest.raises(UnsupportedTypeError, match="device"):
        NvCompBatchCodec("zstd", device=3)


def test_good_arguments_of_numpy_types_are_taken(url):
    got = open_array(url).read(
        device="cpu",
        max_decoded_size=np.uint64(1 << 20),
        max_concurrent_requests=np.int32(4),
        trusted_input=np.bool_(False),
    )
    np.testing.assert_array_equal(got, DATA)
    assert (
        NvCompBatchCodec("zstd", device="cpu", max_decoded_size=2**64 - 1).max_decoded_size
        == 2**64 - 1
    )


# --- selections --------------------------------------------------------------


@pytest.mark.parametrize(
    "selection",
    [
        np.s_[:: 2**70],
        np.s_[:: -(2**70)],
        np.s_[2, :: 2**70],
        np.s_[:, :: -(2**70)],
        np.s_[2**70 :],
        np.s_[-(2**70) :],
        np.s_[: -(2**70)],
        np.s_[-(2**70) : 2**70 : 3],
    ],
)
def test_huge_slice_bounds_and_steps(url, selection):
    expected = DATA[
        tuple(_small(s) for s in (selection if isinstance(selection, tuple) else (selection,)))
    ]
    np.testing.assert_array_equal(open_array(url).read(selection, device="cpu"), expected)


def _small(index):
    """``index`` with bounds and steps beyond any axis of DATA made 100."""
    if not isinstance(index, slice):
        return index
    clamp = lambda v: None if v is None else max(-100, min(100, v))  # noqa: E731
    return slice(clamp(index.start), clamp(index.stop), clamp(index.step))


def test_bad_slices_are_selection_errors(url):
    array = open_array(url)
    with pytest.raises(SelectionError, match="zero"):
        array.read(np.s_[::0], device="cpu")
    with pytest.raises(SelectionError, match="integers"):
        array.read(np.s_[1.5:], device="cpu")


def test_a_whole_axis_of_2_to_the_63_is_no_overflow_error(tmp_path):
    # NumPy's longest axis (an axis of 2**63 is refused: see test_size_bounds).
    url = str(tmp_path / "huge.zarr")
    array = zarrs_nvcomp.create_array(url, shape=(2**63 - 1,), dtype="u1", chunks=(2**20,))
    np.testing.assert_array_equal(array.read(np.s_[2**63 - 4 :], device="cpu"), [0, 0, 0])
    np.testing.assert_array_equal(array.read(np.s_[:: 2**62], device="cpu"), [0, 0])
    with pytest.raises(ZarrsNvcompError):
        array.read(np.s_[:], device="cpu")
