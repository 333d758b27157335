"""Host and device buffers: what the engine takes and what comes back.

Host buffers are anything numcodecs accepts (the buffer protocol, NumPy arrays
of any dtype, C- or F-contiguous); they reach Rust as flat ``uint8`` views.
Device buffers are objects with ``__cuda_array_interface__`` (CuPy, PyTorch,
Numba) or a CUDA ``__dlpack__``; they reach Rust as ``(pointer, length)``.
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray

from zarrs_nvcomp import _cupy_builds
from zarrs_nvcomp._zarrs_nvcomp import CudaError, InvalidArgumentError, UnsupportedTypeError

# DLPack device types whose memory the GPU addresses directly.
_DLPACK_CUDA = 2
_DLPACK_CUDA_MANAGED = 13


@functools.cache
def cupy_module() -> Any:
    """CuPy, or None where it is not installed or cannot run."""
    try:
        import cupy
    except Exception:
        return None
    _cupy_builds.warn_if_several()
    return cupy


def is_device(obj: Any) -> bool:
    """Whether ``obj`` lives in GPU memory."""
    if isinstance(obj, bytes | bytearray | memoryview | np.ndarray):
        return False
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is not None:
        try:
            kind = int(dlpack_device()[0])
        except Exception:
            return False
        return kind in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED)
    return False


def classify(buffers: Sequence[Any], what: str) -> bool:
    """True when every buffer is on the device, False when every one is on the host."""
    cp = cupy_module()
    if cp is not None and all(isinstance(b, cp.ndarray) for b in buffers):
        # Spares building every CuPy array's __cuda_array_interface__ dict.
        return True
    flags = {is_device(b) for b in buffers}
    if len(flags) > 1:
        raise InvalidArgumentError(f"{what} mix host and device buffers; give all of one kind")
    return flags == {True}


def host_view(buf: Any, *, writable: bool = False, what: str = "buffer") -> np.ndarray:
    """``buf`` as a flat, contiguous ``uint8`` NumPy view (no copy)."""
    if type(buf) is bytes:  # the common case (stores, numcodecs), 10x quicker than below
        arr = np.frombuffer(buf, dtype=np.uint8)
    elif isinstance(buf, np.ndarray) and buf.dtype == np.uint8 and buf.ndim == 1:
        arr = buf
        if not arr.flags.c_contiguous:
            raise InvalidArgumentError(f"{what} is not contiguous")
    else:
        try:
            arr = ensure_contiguous_ndarray(buf)
        except ValueError as e:
            raise InvalidArgumentError(f"{what}: {e}") from None
        if arr.dtype != np.uint8:
            arr = arr.view(np.uint8)
    if writable and not arr.flags.writeable:
        raise InvalidArgumentError(f"{what} is read-only")
    return arr


def _synchronize_stream(handle: int) -> None:
    """Waits for the producer's stream (``__cuda_array_interface__`` v3 "stream")."""
    cp = cupy_module()
    if cp is not None:
        cp.cuda.ExternalStream(handle).synchronize()
        return
    libcuda = _libcuda()
    status = libcuda.cuStreamSynchronize(ctypes.c_void_p(handle))
    if status != 0:
        raise CudaError(f"cuStreamSynchronize failed with CUDA error {status}")


@functools.cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


class DeviceRegion:
    """A contiguous device array: its address, its size in bytes, and the object
    that keeps the memory alive."""

    __slots__ = ("nbytes", "owner", "ptr")

    def __init__(self, ptr: int, nbytes: int, owner: Any) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.owner = owner

    def pair(self) -> tuple[int, int]:
        return (self.ptr, self.nbytes)


def device_pairs(objs: Sequence[Any], what: str) -> tuple[list[tuple[int, int]], list[Any]]:
    """``(pointer, length)`` of every device array, after waiting once for each
    stream that produced them; and the objects that keep the memory alive while
    the engine uses it."""
    cp = cupy_module()
    if cp is not None and all(isinstance(o, cp.ndarray) for o in objs):
        # CuPy arrays: read the pointers directly (building 16,384
        # __cuda_array_interface__ dicts costs more than decoding them), and
        # wait for CuPy's current stream, which every array names, once.
        pairs = []
        for i, o in enumerate(objs):
            if not (o.flags.c_contiguous or o.flags.f_contiguous):
                raise InvalidArgumentError(f"{what} {i} is not contiguous")
            pairs.append((o.data.ptr, o.nbytes))
        cp.cuda.get_current_stream().synchronize()
        return pairs, list(objs)
    streams: set[int] = set()
    regions = [device_region(o, what=f"{what} {i}", streams=streams) for i, o in enumerate(objs)]
    for stream in streams:
        _synchronize_stream(stream)
    return [r.pair() for r in regions], regions


def device_region(
    obj: Any, *, what: str = "buffer", streams: set[int] | None = None
) -> DeviceRegion:
    """The device memory of ``obj`` (``__cuda_array_interface__`` or CUDA DLPack).
    The producer's stream is added to ``streams``, or waited for when that is None."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        cp = cupy_module()
        if cp is None:
            raise UnsupportedTypeError(
                f"{what}: a DLPack device array without __cuda_array_interface__ needs CuPy"
            )
        obj = cp.from_dlpack(obj)
        cai = obj.__cuda_array_interface__
    shape = tuple(cai["shape"])
    itemsize = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    if strides is not None and math.prod(shape) > 1:
        if not (
            _contiguous(shape, strides, itemsize)
            or _contiguous(shape[::-1], strides[::-1], itemsize)
        ):
            raise InvalidArgumentError(f"{what} is not contiguous")
    if cai.get("mask") is not None:
        raise InvalidArgumentError(f"{what}: masked arrays are not supported")
    stream = cai.get("stream")
    if stream:
        if streams is None:
            _synchronize_stream(int(stream))
        else:
            streams.add(int(stream))
    ptr = int(cai["data"][0] or 0)
    return DeviceRegion(ptr, math.prod(shape) * itemsize, obj)


def _contiguous(shape: tuple[int, ...], strides: Sequence[int], itemsize: int) -> bool:
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides), strict=True):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def device_outputs(batch: Any) -> list[Any]:
    """The buffers of a ``DeviceBatch``: CuPy views of its one allocation when
    CuPy is installed, :class:`zarrs_nvcomp.CudaArray` views (which expose
    ``__cuda_array_interface__`` and ``__dlpack__``) otherwise. They keep the
    batch alive."""
    cp = cupy_module()
    if cp is None:
        return batch.arrays()
    ranges = batch.ranges
    base, device = batch.ptr, batch.device
    total = batch.nbytes
    if total == 0:
        with cp.cuda.Device(device):
            return [cp.empty(0, dtype=cp.uint8) for _ in ranges]
    memory = cp.cuda.UnownedMemory(base, total, batch, device)
    whole = cp.ndarray((total,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(memory, 0))
    return [whole[a:b] for a, b in ranges]


def host_outputs(batch: Any) -> list[np.ndarray]:
    """The buffers of a ``HostBatch`` as ``uint8`` views of its one allocation."""
    whole = np.frombuffer(batch, dtype=np.uint8)
    return [whole[a:b] for a, b in pairwise(batch.offsets)]


def to_host(obj: Any) -> np.ndarray:
    """Copies a device array to a host ``uint8`` array (CPU codec given device data)."""
    cp = cupy_module()
    if cp is None:
        raise UnsupportedTypeError("decoding device arrays on the CPU backend needs CuPy")
    region = device_region(obj)
    if region.nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    memory = cp.cuda.UnownedMemory(region.ptr, region.nbytes, region.owner)
    arr = cp.ndarray((region.nbytes,), cp.uint8, cp.cuda.MemoryPointer(memory, 0))
    return cp.asnumpy(arr)


def to_device(arrays: Sequence[Any]) -> list[Any]:
    """Copies host results back to the device (CPU codec given device data)."""
    cp = cupy_module()
    return [cp.asarray(np.frombuffer(memoryview(a), dtype=np.uint8)) for a in arrays]
