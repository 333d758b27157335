"""Orthogonal and coordinate selections (zarr's ``oindex`` and ``vindex``,
integer arrays and boolean masks), each read as one read of the chunks it
touches.

A selection is planned as boxes of the array, each inside one chunk per
axis: the span, in each chunk the selection touches, from its lowest
selected index to its highest. The reader reads every box in one call
(``read_boxes``: their chunks fetched and decoded together, on the GPU in
one nvCOMP batch call per wave), and the selected elements are then taken
from the boxes where they are (NumPy or CuPy).
"""

from __future__ import annotations

import math
import operator
from itertools import product
from typing import TYPE_CHECKING, Any

import numpy as np

from zarrs_nvcomp._read_out import device_result, empty_result, resolve_device
from zarrs_nvcomp._selection import checked_slice
from zarrs_nvcomp._zarrs_nvcomp import CudaArray, SelectionError, UnsupportedTypeError

if TYPE_CHECKING:
    from zarrs_nvcomp.reader import Array

__all__ = [
    "OrthogonalIndexer",
    "Plan",
    "VectorizedIndexer",
    "getitem_plan",
    "is_fancy",
    "read_plan",
]


def is_index_array(sel: Any) -> bool:
    """Whether ``sel`` is an integer array or a boolean mask (a list, a
    NumPy array or a GPU array)."""
    return isinstance(sel, list | np.ndarray) or hasattr(sel, "__cuda_array_interface__")


def is_fancy(selection: Any) -> bool:
    """Whether ``selection`` holds an index array that basic indexing does
    not take."""
    items = selection if isinstance(selection, tuple) else (selection,)
    return any(is_index_array(s) for s in items)


def _is_coordinate(index: Any) -> bool:
    """Whether ``index`` is one axis of a coordinate selection: an integer
    array, or an integer (a 0-d one)."""
    return is_index_array(index) or (
        isinstance(index, int | np.integer) and not isinstance(index, bool)
    )


def _host(index: Any) -> Any:
    """An index array on the host (a GPU array's indices are copied)."""
    if hasattr(index, "__cuda_array_interface__") and hasattr(index, "get"):
        return index.get()
    return np.asarray(index)


def _indices(sel: Any, n: int, axis: int) -> np.ndarray:
    """The indices one axis of an orthogonal selection selects, in order."""
    if isinstance(sel, slice):
        return np.arange(*checked_slice(sel).indices(n), dtype=np.int64)
    if not is_index_array(sel):
        try:
            sel = [operator.index(sel)]
        except TypeError:
            raise SelectionError(f"axis {axis}: {sel!r} is not an index, slice or array") from None
    array = _host(sel)
    if array.dtype == bool:
        if array.shape != (n,):
            raise SelectionError(f"axis {axis}: a mask of shape {array.shape} for {n} elements")
        return np.flatnonzero(array)
    if array.size == 0:
        return np.zeros(0, np.int64)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise SelectionError(f"axis {axis}: index arrays are 1-d integers, not {array.dtype}")
    array = array.astype(np.int64)
    if array.min() < -n or array.max() >= n:
        raise SelectionError(f"axis {axis}: an index is out of bounds for {n} elements")
    return array % n


def _spans(indices: np.ndarray, chunk: int) -> list[tuple[int, int]]:
    """The span of each chunk the sorted unique ``indices`` fall in: from
    the lowest index in it to the highest, plus one."""
    if indices.size == 0:
        return []
    chunk_of = indices // chunk
    starts = np.flatnonzero(np.diff(chunk_of, prepend=-1))
    ends = np.append(starts[1:], indices.size) - 1
    return [(int(indices[a]), int(indices[b]) + 1) for a, b in zip(starts, ends, strict=True)]


def _axes(selection: Any, ndim: int) -> tuple[Any, ...]:
    """``selection`` with its ``...`` expanded and missing axes whole."""
    items = selection if isinstance(selection, tuple) else (selection,)
    if any(s is Ellipsis for s in items):
        i = next(k for k, s in enumerate(items) if s is Ellipsis)
        items = (*items[:i], *(slice(None),) * (ndim - len(items) + 1), *items[i + 1 :])
    if len(items) > ndim:
        raise SelectionError(f"too many indices for an array of {ndim} dimensions")
    return (*items, *(slice(None),) * (ndim - len(items)))


class Plan:
    """The boxes a selection reads, and how its elements are taken from
    the boxes' elements back to back."""

    def __init__(self, boxes: list[list[tuple[int, int]]], take: Any) -> None:
        self.boxes = boxes
        self.take = take


def _module(array: Any) -> Any:
    """NumPy, or CuPy for a CuPy array."""
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy


def orthogonal_plan(selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> Plan:
    """The plan of an orthogonal selection: per axis an integer (which drops
    its axis), a slice, an integer array or a boolean mask."""
    axes = _axes(selection, len(shape))
    picked = [_indices(sel, n, axis) for axis, (sel, n) in enumerate(zip(axes, shape, strict=True))]
    kept = [axis for axis, sel in enumerate(axes) if isinstance(sel, slice) or is_index_array(sel)]
    spans = [_spans(np.unique(p), c) for p, c in zip(picked, chunks, strict=True)]
    # The boxes tile a dense block: per axis, the indices of its spans.
    covered = [np.concatenate([np.arange(a, b) for a, b in s] or [np.zeros(0, int)]) for s in spans]
    positions = [np.searchsorted(c, p) for c, p in zip(covered, picked, strict=True)]
    offsets = [np.cumsum([0] + [b - a for a, b in s]) for s in spans]
    result_shape = tuple(picked[axis].size for axis in kept)

    def take(flat: Any) -> Any:
        xp = _module(flat)
        if math.prod(len(c) for c in covered) == 0 or math.prod(result_shape) == 0:
            return xp.empty(result_shape, dtype=flat.dtype)
        dense = xp.empty(tuple(len(c) for c in covered), dtype=flat.dtype)
        at = 0
        for index in product(*(range(len(s)) for s in spans)):
            box = tuple(spans[d][i][1] - spans[d][i][0] for d, i in enumerate(index))
            place = tuple(slice(offsets[d][i], offsets[d][i + 1]) for d, i in enumerate(index))
            dense[place] = flat[at : at + math.prod(box)].reshape(box)
            at += math.prod(box)
        return dense[xp.ix_(*(xp.asarray(p) for p in positions))].reshape(result_shape)

    return Plan([list(b) for b in product(*spans)], take)


def vectorized_plan(selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> Plan:
    """The plan of a coordinate selection: an integer array per axis (or one
    boolean mask of the array's shape), broadcast together; the result has
    their broadcast shape."""
    items = selection if isinstance(selection, tuple) else (selection,)
    mask = _host(items[0]) if len(items) == 1 and is_index_array(items[0]) else None
    if mask is not None and mask.dtype == bool:
        if mask.shape != shape:
            raise SelectionError(f"a mask of shape {mask.shape} for an array of shape {shape}")
        items = tuple(np.nonzero(mask))
    if len(items) != len(shape) or not all(_is_coordinate(i) for i in items):
        raise SelectionError(f"vindex takes an index array for each of the {len(shape)} axes")
    try:
        arrays = np.broadcast_arrays(*(_host(i) for i in items))
    except ValueError as e:
        raise SelectionError(f"the index arrays do not broadcast together: {e}") from None
    out_shape = arrays[0].shape
    points = [
        _indices(a.reshape(-1), n, axis)
        for axis, (a, n) in enumerate(zip(arrays, shape, strict=True))
    ]
    if points[0].size == 0:
        return Plan([], lambda flat: _module(flat).empty(out_shape, dtype=flat.dtype))
    coords = np.stack(points, axis=1)
    keys, box_of = np.unique(coords // np.asarray(chunks), axis=0, return_inverse=True)
    box_of = box_of.reshape(-1)
    low = np.full((len(keys), len(shape)), np.iinfo(np.int64).max)
    high = np.zeros((len(keys), len(shape)), np.int64)
    np.minimum.at(low, box_of, coords)
    np.maximum.at(high, box_of, coords + 1)
    extent = high - low
    starts = np.concatenate([[0], np.cumsum(np.prod(extent, axis=1))[:-1]])
    # Each point's C-order offset in its box, after its box's start.
    strides = np.cumprod(
        np.concatenate([extent[:, 1:], np.ones((len(keys), 1), int)], 1)[:, ::-1], 1
    )
    flat_at = starts[box_of] + ((coords - low[box_of]) * strides[:, ::-1][box_of]).sum(axis=1)
    boxes = [
        [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)]
        for lo, hi in zip(low, high, strict=True)
    ]
    return Plan(boxes, lambda flat: flat[_module(flat).asarray(flat_at)].reshape(out_shape))


def _planned_chunks(array: Array) -> tuple[int, ...]:
    """The chunks a selection's boxes lie in: a sharded array's inner
    chunks, the stored chunks otherwise."""
    codecs = array.codecs
    if array.zarr_format == 3 and len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed":
        return tuple(codecs[0]["configuration"]["chunk_shape"])
    return array.chunks


def read_plan(array: Array, plan: Plan, device: str | None, **options: Any) -> Any:
    """The selection ``plan`` of ``array`` read on ``device``, in one read."""
    dtype = array.dtype
    device = resolve_device(device, dtype)
    if not plan.boxes:
        flat: Any = empty_result((0,), dtype, device)
    else:
        data = array._inner.read_boxes(plan.boxes, device, **options)
        count = sum(math.prod(b - a for a, b in box) for box in plan.boxes)
        if isinstance(data, CudaArray):
            flat = device_result(data, (count,), dtype, (), (count,))
            if isinstance(flat, CudaArray):
                raise UnsupportedTypeError("index-array reads into GPU memory need CuPy")
        else:
            flat = np.frombuffer(data, dtype=dtype)
    return plan.take(flat)


class OrthogonalIndexer:
    """``array.oindex[selection]``: per axis an integer, a slice, an
    integer array or a boolean mask, each axis selected on its own (zarr's
    and NumPy's ``ix_`` semantics)."""

    __slots__ = ("_array",)

    def __init__(self, array: Array) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Any:
        a = self._array
        return read_plan(a, orthogonal_plan(selection, a.shape, _planned_chunks(a)), None)


class VectorizedIndexer:
    """``array.vindex[selection]``: an integer array per axis, broadcast
    together and read as coordinates, or one boolean mask of the array's
    shape (zarr's coordinate and mask selections)."""

    __slots__ = ("_array",)

    def __init__(self, array: Array) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Any:
        a = self._array
        return read_plan(a, vectorized_plan(selection, a.shape, _planned_chunks(a)), None)


def getitem_plan(array: Array, selection: Any) -> Plan:
    """The plan of ``array[selection]`` with index arrays, as zarr reads it:
    index arrays (and integers) alone, or one mask of the array's shape, are
    coordinates (``vindex``); with slices, or one index array, orthogonal."""
    items = selection if isinstance(selection, tuple) else (selection,)
    arrays = [s for s in items if is_index_array(s)]
    whole_mask = len(items) == 1 and _host(items[0]).dtype == bool and array.ndim > 1
    coordinates = len(arrays) > 1 and all(
        is_index_array(s) or isinstance(s, int | np.integer) for s in items
    )
    if whole_mask or coordinates:
        return vectorized_plan(selection, array.shape, _planned_chunks(array))
    return orthogonal_plan(selection, array.shape, _planned_chunks(array))
