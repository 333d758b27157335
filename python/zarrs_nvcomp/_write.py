"""Writes into an opened array: the part of the writer that
``Array.__setitem__`` and :func:`zarrs_nvcomp.write_chunks_parallel` share,
so that the reader and the writer need not import each other."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._selection import normalize
from zarrs_nvcomp._zarrs_nvcomp import (
    InvalidArgumentError,
    SelectionError,
    UnsupportedTypeError,
    write_chunks,
)

__all__ = ["write_into"]


def write_into(
    array: Any,
    data: Any,
    selection: Any = (),
    *,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
) -> tuple[int, int]:
    """:func:`zarrs_nvcomp.write_chunks_parallel` into ``array``, an opened
    :class:`zarrs_nvcomp.Array`, its keyword arguments checked already."""
    strided, flips, out_shape = normalize(selection, array.shape)
    if flips or any(step != 1 for _, _, step in strided):
        raise SelectionError("writes take selections with steps of 1")
    start = [s for s, _, _ in strided]
    box = [stop - s for s, stop, _ in strided]
    if math.prod(box) == 0:
        return (0, 0)
    dtype = array.dtype.newbyteorder("=")
    host = device_data = None
    alive: Any = None
    if _buffers.is_device(data):
        alive, ordinal = _device_box(data, dtype, out_shape, box)
        region = _buffers.device_region(alive, what="data")
        device_data = (region.ptr, region.nbytes)
        if device is None:
            device = f"cuda:{ordinal}"
    else:
        # Flat first: a 0-d array cannot be viewed as bytes.
        host = _host_box(data, dtype, out_shape).reshape(-1).view(np.uint8)
    stored, fill_chunks, _ = write_chunks(
        array.url,
        array._storage_options,
        start,
        box,
        host=host,
        device_data=device_data,
        device=device,
        write_empty_chunks=write_empty_chunks,
        max_concurrent_requests=max_concurrent_requests,
    )
    del alive
    return stored, fill_chunks


def _host_box(data: Any, dtype: np.dtype, out_shape: tuple[int, ...]) -> np.ndarray:
    """Host ``data`` cast to ``dtype`` and broadcast to the selection's shape,
    C-contiguous; data that NumPy cannot cast (a value out of the type's range,
    NaN for integers, text) or broadcast is an :class:`InvalidArgumentError`."""
    try:
        return np.ascontiguousarray(np.broadcast_to(np.asarray(data, dtype=dtype), out_shape))
    except (OverflowError, TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"data cannot be written to the selection of shape {out_shape} as {dtype}: {e}"
        ) from e


def _device_box(
    data: Any, dtype: np.dtype, out_shape: tuple[int, ...], box: list[int]
) -> tuple[Any, int]:
    """GPU ``data`` as a C-contiguous device array of ``box``'s shape and
    ``dtype`` (copied on the GPU where it is not one), and its device."""
    cp = _buffers.cupy_module()
    if cp is None:
        cai = getattr(data, "__cuda_array_interface__", None)
        if (
            cai is None
            or tuple(cai["shape"]) != tuple(out_shape)
            or np.dtype(cai["typestr"]) != dtype
        ):
            raise UnsupportedTypeError(
                "GPU data without CuPy must be a contiguous array of the selection's shape "
                f"{out_shape} and dtype {dtype}"
            )
        return data, int(getattr(data, "device", 0) or 0)
    arr = cp.asarray(data) if hasattr(data, "__cuda_array_interface__") else cp.from_dlpack(data)
    with arr.device:
        arr = cp.ascontiguousarray(cp.broadcast_to(arr.astype(dtype, copy=False), out_shape))
        return arr.reshape(box), arr.device.id
