"""CudaArray views of one device buffer (``zarrs_nvcomp.device_views``, the
codec's ``device_outputs="views"``) and the fast reading of CuPy arrays and
views as inputs. No GPU needed: the memory is never touched."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from test_device_regions import Fake

import zarrs_nvcomp
from zarrs_nvcomp import _buffers
from zarrs_nvcomp._zarrs_nvcomp import read_device_regions


class FakeWithDevice(Fake):
    """A device buffer that says its device through DLPack."""

    def __dlpack_device__(self):
        return (2, 3)


def test_views_split_the_buffer_and_expose_the_interface():
    views = zarrs_nvcomp.device_views(Fake(0x10000, (10,)), [4, 0, 6], device=1)
    assert [v.ptr for v in views] == [0x10000, 0x10004, 0x10004]
    assert [v.nbytes for v in views] == [4, 0, 6]
    assert all(isinstance(v, zarrs_nvcomp.CudaArray) for v in views)
    assert views[2].__cuda_array_interface__ == {
        "version": 3,
        "shape": (6,),
        "typestr": "|u1",
        "data": (0x10004, False),
        "strides": None,
        "stream": None,
    }
    # An empty view names no address, as CuPy's empty arrays do.
    assert views[1].__cuda_array_interface__["data"] == (0, False)
    assert [v.__dlpack_device__() for v in views] == [(2, 1)] * 3
    assert views[0].shape == [4] and views[0].typestr == "|u1" and len(views[2]) == 6


def test_views_take_the_device_from_dlpack_or_are_told_it():
    (view,) = zarrs_nvcomp.device_views(FakeWithDevice(0x2000, (8,)), np.array([8], np.uint32))
    assert view.device == 3
    with pytest.raises(ValueError, match="no __dlpack_device__: give the buffer's device="):
        zarrs_nvcomp.device_views(Fake(0x2000, (8,)), [8])


@pytest.mark.parametrize(
    ("sizes", "match"),
    [
        ([4, 5], "add up to 9 bytes but the packed buffer holds 10"),
        ([[5, 5]], "one-dimensional"),
        ([5.0, 5.0], "integers"),
        ([-1, 11], "negative"),
    ],
)
def test_views_refuse_sizes_that_do_not_cover_the_buffer(sizes, match):
    with pytest.raises(ValueError, match=match):
        zarrs_nvcomp.device_views(Fake(0x1000, (10,)), sizes, device=0)


def test_views_of_a_non_contiguous_buffer_are_refused():
    with pytest.raises(ValueError, match="buffer 0 is not contiguous"):
        zarrs_nvcomp.device_views(Fake(0x1000, (4,), "<f4", strides=(8,)), [16], device=0)


def test_a_view_keeps_the_buffer_alive_after_the_list_is_gone():
    owner = Fake(0x4000, (12,))
    alive = weakref.ref(owner)
    views = zarrs_nvcomp.device_views(owner, [4, 4, 4], device=0)
    kept = views[1]
    del owner, views
    gc.collect()
    assert alive() is not None
    assert kept.__cuda_array_interface__["data"] == (0x4004, False)
    del kept
    gc.collect()
    assert alive() is None


def test_reshaped_and_dlpack_exports_keep_the_buffer_alive():
    owner = Fake(0x4000, (8,))
    alive = weakref.ref(owner)
    (view,) = zarrs_nvcomp.device_views(owner, [8], device=0)
    reshaped = view.reshape([2, 4])
    capsule = view.__dlpack__()
    del owner, view
    gc.collect()
    assert alive() is not None and reshaped.shape == [2, 4]
    del reshaped, capsule
    gc.collect()
    assert alive() is None


def test_views_are_read_back_as_inputs_through_their_fields():
    views = zarrs_nvcomp.device_views(Fake(0x8000, (30,)), [10, 20], device=0)
    assert _buffers.classify(views, "inputs") is True
    assert _buffers.is_device(views[0])
    regions = read_device_regions(views, "input")
    assert regions.regions == [(0x8000, 10), (0x800A, 20)]
    assert regions.streams == [] and not regions.read_cupy_fields


class FakePointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class FakeCupy:
    """The fields of a CuPy array that the fast path reads; its interface
    (the slow path, used when the fields say it is not contiguous) names a
    stream, as CuPy's does."""

    def __init__(self, ptr: int, nbytes: int, contiguous: bool = True) -> None:
        self.data = FakePointer(ptr)
        self.nbytes = nbytes
        self._c_contiguous = contiguous
        self._f_contiguous = False

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.data.ptr, False),
            "version": 3,
            "stream": 5,
        }


def test_cupy_arrays_are_read_through_their_fields():
    objs = [FakeCupy(0x1000, 64), FakeCupy(0x2000, 32)]
    regions = read_device_regions(objs, "input", FakeCupy)
    assert regions.regions == [(0x1000, 64), (0x2000, 32)]
    # The fields name no stream: the caller waits for CuPy's current one.
    assert regions.streams == [] and regions.read_cupy_fields
    # Without the type, the same objects are read through their interface.
    through_interface = read_device_regions(objs, "input")
    assert through_interface.regions == regions.regions
    assert through_interface.streams == [5] and not through_interface.read_cupy_fields


def test_a_cupy_array_whose_fields_fail_is_read_through_its_interface():
    regions = read_device_regions([FakeCupy(0x1000, 8, contiguous=False)], "input", FakeCupy)
    assert regions.regions == [(0x1000, 8)]
    assert regions.streams == [5] and not regions.read_cupy_fields


class FakeBatch:
    """What ``_buffers.device_outputs`` reads of a ``DeviceBatch`` to make CuPy
    arrays: buffers at a made-up address, back to back or with alignment gaps."""

    ptr, device = 0x7F0000000000, 0

    def __init__(self, ranges: list[tuple[int, int]], nbytes: int) -> None:
        self.ranges, self.nbytes = ranges, nbytes
        ends = [0] + [end for _, end in ranges[:-1]]
        self.is_packed = [start for start, _ in ranges] == ends

    def ranges_buffer(self) -> bytes:
        return np.asarray(self.ranges, dtype=np.uint64).tobytes()


@pytest.mark.parametrize(
    "ranges",
    [[(0, 100), (128, 128), (128, 256)], [(0, 100), (100, 100), (100, 228)]],
    ids=["gaps", "packed"],
)
def test_cupy_outputs_view_one_allocation_that_keeps_the_batch_alive(ranges):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    batch = FakeBatch(ranges, 256)
    alive = weakref.ref(batch)
    arrays = _buffers.device_outputs(batch)
    assert all(isinstance(a, cp.ndarray) and a.dtype == cp.uint8 for a in arrays)
    assert [a.data.ptr for a in arrays] == [batch.ptr + start for start, _ in ranges]
    assert [a.shape for a in arrays] == [(end - start,) for start, end in ranges]
    assert all(a.flags.c_contiguous for a in arrays)
    assert [a.device.id for a in arrays] == [0] * 3
    kept = arrays[2]
    del batch, arrays
    gc.collect()
    assert alive() is not None
    del kept
    gc.collect()
    assert alive() is None
