"""Writes into an opened array: the part of the writer that
``Array.__setitem__`` and `zarrs_nvcomp.write_chunks_parallel` share,
so that the reader and the writer need not import each other."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._selection import normalize
from zarrs_nvcomp._zarrs_nvcomp import (
    InvalidArgumentError,
    SelectionError,
    UnsupportedTypeError,
    write_chunks,
    write_chunks_async,
)

__all__ = ["write_into", "write_into_async"]


def write_into(
    array: Any,
    data: Any,
    selection: Any = (),
    *,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
) -> tuple[int, int]:
    """`zarrs_nvcomp.write_chunks_parallel` into ``array``, an opened
    `zarrs_nvcomp.Array`, its keyword arguments checked already."""
    stored = fill_chunks = 0
    for call, _ in _write_calls(array, data, selection, device):
        done, fills, _ = write_chunks(
            **call,
            write_empty_chunks=write_empty_chunks,
            max_concurrent_requests=max_concurrent_requests,
        )
        stored, fill_chunks = stored + done, fill_chunks + fills
        # Freed before the next piece of a broadcast value is made.
        del call
    return stored, fill_chunks


async def write_into_async(
    array: Any,
    data: Any,
    selection: Any = (),
    *,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
) -> tuple[int, int]:
    """`write_into` as an awaitable: each write a task of the library's own
    (``python/src/awaitable.rs``) that the event loop waits for."""
    loop = asyncio.get_running_loop()
    stored = fill_chunks = 0
    for call, keep in _write_calls(array, data, selection, device):
        # The task holds the device data until it ends, even if cancelled.
        done, fills, _ = await write_chunks_async(
            loop,
            **call,
            keep_alive=keep,
            write_empty_chunks=write_empty_chunks,
            max_concurrent_requests=max_concurrent_requests,
        )
        stored, fill_chunks = stored + done, fill_chunks + fills
        del call, keep
    return stored, fill_chunks


def _write_calls(
    array: Any, data: Any, selection: Any, device: str | None
) -> Iterator[tuple[dict[str, Any], Any]]:
    """The arguments of the writes of ``data`` into ``selection`` of
    ``array``: one write, or pieces of a broadcast value made one at a
    time; each with the device data it reads (None for host data), which
    must stay referenced while it runs."""
    if array.read_only:
        raise InvalidArgumentError(f"{array.url} was opened with mode='r': it cannot be written")
    strided, flips, out_shape = normalize(selection, array.shape)
    if flips or any(step != 1 for _, _, step in strided):
        raise SelectionError("writes take selections with steps of 1")
    start = [s for s, _, _ in strided]
    box = [stop - s for s, stop, _ in strided]
    if math.prod(box) == 0:
        return
    dtype = array.dtype.newbyteorder("=")
    at = {"url": array.url, "storage_options": array._storage_options}
    if _buffers.is_device(data):
        alive, ordinal = _device_box(data, dtype, out_shape, box)
        region = _buffers.device_region(alive, what="data")
        yield (
            {
                **at,
                "start": start,
                "shape": box,
                "host": None,
                "device_data": (region.ptr, region.nbytes),
                "device": f"cuda:{ordinal}" if device is None else device,
            },
            alive,
        )
        return
    view = _host_view(data, dtype, out_shape)
    if view.size > np.asarray(data).size and view.nbytes > BROADCAST_PIECE_BYTES:
        # A broadcast value (a scalar): written piece by piece, never whole.
        view = view.reshape(box)
        for offset, lens in chunk_aligned_pieces(start, box, array.chunks, view.itemsize):
            piece = view[tuple(slice(o, o + n) for o, n in zip(offset, lens, strict=True))]
            yield (
                {
                    **at,
                    "start": [s + o for s, o in zip(start, offset, strict=True)],
                    "shape": lens,
                    "host": np.ascontiguousarray(piece).reshape(-1).view(np.uint8),
                    "device_data": None,
                    "device": device,
                },
                None,
            )
        return
    # Flat first: a 0-d array cannot be viewed as bytes.
    host = np.ascontiguousarray(view).reshape(-1).view(np.uint8)
    yield (
        {**at, "start": start, "shape": box, "host": host, "device_data": None, "device": device},
        None,
    )


def _host_view(data: Any, dtype: np.dtype, out_shape: tuple[int, ...]) -> np.ndarray:
    """Host ``data`` cast to ``dtype`` and broadcast to the selection's shape
    (a view: a scalar takes no memory); data that NumPy cannot cast (a value
    out of the type's range, NaN for integers, text) or broadcast is an
    `InvalidArgumentError`."""
    try:
        return np.broadcast_to(np.asarray(data, dtype=dtype), out_shape)
    except (OverflowError, TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"data cannot be written to the selection of shape {out_shape} as {dtype}: {e}"
        ) from e


#: The most bytes of a broadcast value made at once: ``a[:] = 0`` on an
#: array of a TiB writes pieces of this size, whole chunks (shards) each.
BROADCAST_PIECE_BYTES = 256 << 20


def chunk_aligned_pieces(
    start: list[int], box: list[int], chunks: tuple[int, ...], itemsize: int
) -> Iterator[tuple[list[int], list[int]]]:
    """The pieces of ``box`` at ``start`` (offsets in the box, and lengths):
    whole chunks on the axes up to the first one that brings a piece under
    `BROADCAST_PIECE_BYTES`, as many of them along that axis as fit,
    and the whole box on the axes after it; one chunk at a time where a
    chunk alone is larger."""
    ndim = len(box)
    if ndim == 0:
        yield [], []
        return

    def piece_bytes(axis: int) -> int:
        size = itemsize * math.prod(box[axis + 1 :])
        return size * math.prod(
            min(c, n) for c, n in zip(chunks[: axis + 1], box[: axis + 1], strict=True)
        )

    axis = next((d for d in range(ndim) if piece_bytes(d) <= BROADCAST_PIECE_BYTES), ndim - 1)
    steps = list(chunks[: axis + 1])
    steps[axis] *= max(1, BROADCAST_PIECE_BYTES // max(1, piece_bytes(axis)))
    spans = [list(_aligned_spans(start[d], box[d], chunks[d], steps[d])) for d in range(axis + 1)]
    for combo in itertools.product(*spans):
        yield (
            [o for o, _ in combo] + [0] * (ndim - axis - 1),
            [n for _, n in combo] + box[axis + 1 :],
        )


def _aligned_spans(start: int, length: int, chunk: int, step: int) -> Iterator[tuple[int, int]]:
    """``[start, start + length)`` cut where a chunk boundary begins a new
    ``step`` (a multiple of ``chunk``): (offset from ``start``, length) each."""
    end = start + length
    at = start
    while at < end:
        cut = min(end, (at // chunk) * chunk + step)
        yield at - start, cut - at
        at = cut


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
