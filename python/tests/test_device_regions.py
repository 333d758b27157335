"""Reading device pointers and sizes (no GPU needed: the memory is never touched)."""

from __future__ import annotations

import pytest

import zarrs_nvcomp
from zarrs_nvcomp._zarrs_nvcomp import read_device_regions


class Fake:
    """An object exposing ``__cuda_array_interface__``, never dereferenced."""

    def __init__(self, ptr=0x7000, shape=(16,), typestr="|u1", **extra) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "version": 3,
            **extra,
        }


def test_pointers_sizes_and_streams_are_read():
    objs = [
        Fake(0x1000, (4, 8), "<f4"),
        Fake(0x2000, (3,), "<u2", strides=(2,), stream=7),
        Fake(0x3000, (2, 3), "<f8", strides=(8, 16), stream=7),  # Fortran order
        Fake(0x4000, (1, 5), "|u1", strides=(99, 1), stream=9),  # an axis of length 1
        Fake(None, (0,), "<f4"),
    ]
    regions = read_device_regions(objs, "input")
    assert regions.regions == [(0x1000, 128), (0x2000, 6), (0x3000, 48), (0x4000, 5), (0, 0)]
    assert sorted(regions.streams) == [7, 9]
    assert len(regions) == 5


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        (Fake(shape=(4,), typestr="<f4", strides=(8,)), ValueError, "input 1 is not contiguous"),
        (Fake(mask=Fake()), ValueError, "input 1: masked"),
        (Fake(typestr="<f"), ValueError, "item size"),
        (object(), TypeError, "input 1 has no __cuda_array_interface__"),
    ],
)
def test_bad_device_buffers_are_named(obj, error, match):
    with pytest.raises(error, match=match) as caught:
        read_device_regions([Fake(), obj], "input")
    assert isinstance(caught.value, zarrs_nvcomp.ZarrsNvcompError)
