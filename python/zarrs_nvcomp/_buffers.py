"""Host and device buffers: what the engine takes and what comes back.

Host buffers are anything numcodecs accepts (the buffer protocol, NumPy arrays
of any dtype, C- or F-contiguous); they reach Rust as flat ``uint8`` views.
Device buffers are objects with ``__cuda_array_interface__`` (CuPy, PyTorch,
Numba) or a CUDA ``__dlpack__``; they reach Rust as ``(pointer, length)``.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray

from zarrs_nvcomp import _cupy_builds
from zarrs_nvcomp._zarrs_nvcomp import (
    CudaArray,
    CudaError,
    InvalidArgumentError,
    UnsupportedTypeError,
    read_device_regions,
    split_device,
)

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
    if isinstance(obj, CudaArray):  # without building its interface dict
        return True
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
    device_types = CudaArray if cp is None else (cp.ndarray, CudaArray)
    # The types of a batch are few: collecting them in C and checking each
    # once took a third of the time of an isinstance call per buffer (16,384
    # buffers: 0.27 against 0.77 ms on the 2-core machine).
    if all(issubclass(t, device_types) for t in set(map(type, buffers))):
        # Spares building every array's __cuda_array_interface__ dict.
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


def device_regions(
    objs: Sequence[Any], what: str, stream: int | None = None
) -> tuple[Any, list[Any]]:
    """The ``DeviceRegions`` of device arrays (read in Rust: CuPy arrays through
    their fields, others through ``__cuda_array_interface__``, DLPack-only ones
    through CuPy), after waiting once for each stream that produced them
    (``stream``, the caller's, in place of CuPy's current one when given); and
    the objects that keep the memory alive while the engine uses it."""
    cp = cupy_module()
    ndarray = None if cp is None else cp.ndarray
    objs = objs if type(objs) is list else list(objs)
    try:
        regions = read_device_regions(objs, what, ndarray)
    except UnsupportedTypeError:
        # Objects with only __dlpack__: CuPy views of them have the interface.
        objs = [_with_interface(o, f"{what} {i}") for i, o in enumerate(objs)]
        regions = read_device_regions(objs, what, ndarray)
    waits = set(regions.streams)
    if stream is not None:
        waits.add(stream)
    elif regions.read_cupy_fields:
        # CuPy arrays are read through their fields, which name no stream:
        # CuPy's current stream is theirs.
        waits.add(cp.cuda.get_current_stream().ptr)
    for handle in waits:
        _synchronize_stream(handle)
    return regions, objs


def _with_interface(obj: Any, what: str) -> Any:
    if hasattr(obj, "__cuda_array_interface__"):
        return obj
    cp = cupy_module()
    if cp is None or not is_device(obj):
        raise UnsupportedTypeError(
            f"{what}: a device array needs __cuda_array_interface__, or CuPy for DLPack"
        )
    return cp.from_dlpack(obj)


def device_region(obj: Any, *, what: str = "buffer") -> DeviceRegion:
    """The device memory of one array (``__cuda_array_interface__``, CuPy or
    CUDA DLPack), after waiting for the stream that produced it."""
    regions, (owner,) = device_regions([obj], what)
    ((ptr, nbytes),) = regions.regions
    return DeviceRegion(ptr, nbytes, owner)


def device_outputs(batch: Any, *, views: bool = False) -> list[Any]:
    """The buffers of a ``DeviceBatch``, each keeping the whole batch alive:
    `zarrs_nvcomp.CudaArray` views (which expose
    ``__cuda_array_interface__`` and ``__dlpack__``) when ``views`` or
    without CuPy, CuPy arrays otherwise.

    A CudaArray is made in Rust for some tens of nanoseconds; a CuPy array
    costs over a microsecond whichever way it is made. The quickest ways
    measured (``benches/python_boundary.py``, CPU time on the 2-core machine,
    per buffer): ``cupy.split`` of one array of the allocation, which makes
    its views in CuPy's compiled code, where the buffers lie back to back
    (1.26 us, against 2.1 us for slicing that array buffer by buffer); the
    ``ndarray`` constructor on each buffer's pointer where alignment gaps lie
    between them (1.6 us; splitting at the gaps too took 2.6 us)."""
    cp = cupy_module()
    if views or cp is None:
        return batch.arrays()
    ranges = batch_ranges(batch)
    base, device = batch.ptr, batch.device
    total = batch.nbytes
    if total == 0:
        with cp.cuda.Device(device):
            return [cp.empty(0, dtype=cp.uint8) for _ in range(len(ranges))]
    memory = cp.cuda.UnownedMemory(base, total, batch, device)
    starts, ends = ranges[:, 0].tolist(), ranges[:, 1].tolist()
    if batch.is_packed:
        whole = cp.ndarray((ends[-1],), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(memory, 0))
        return cp.split(whole, starts[1:])
    ndarray, pointer, uint8 = cp.ndarray, cp.cuda.MemoryPointer, np.dtype(np.uint8)
    return [
        ndarray((end - start,), uint8, pointer(memory, start))
        for start, end in zip(starts, ends, strict=True)
    ]


def batch_ranges(batch: Any) -> np.ndarray:
    """The ``(start, end)`` byte ranges of a ``DeviceBatch``'s buffers as an
    ``(n, 2)`` ``uint64`` array, read from one buffer (its ``ranges``, a list
    of tuples, costs a Python int per bound)."""
    return np.frombuffer(batch.ranges_buffer(), dtype=np.uint64).reshape(-1, 2)


def device_views(
    buffer: Any, sizes: Any, *, device: int | None = None, stream: Any = None
) -> list[Any]:
    """One contiguous device buffer (CuPy, `zarrs_nvcomp.CudaArray`,
    anything with ``__cuda_array_interface__`` or a CUDA ``__dlpack__``)
    split into consecutive items of ``sizes[i]`` bytes, which must add up to
    the buffer's size: a list of 1-D ``uint8`` `zarrs_nvcomp.CudaArray`
    views, each keeping ``buffer`` alive, made for some tens of nanoseconds
    each (the list form of what ``decode_packed`` returns, without a CuPy
    array per item). ``device``: the buffer's CUDA ordinal, read from its
    ``__dlpack_device__`` when None. Waits first for the stream that produced
    the buffer, as the codec's calls do (``stream``: theirs); the views name
    no stream."""
    items = item_sizes(sizes)
    regions, (owner,) = device_regions([buffer], "buffer", stream_handle(stream))
    ((ptr, nbytes),) = regions.regions
    return split_device(owner, ptr, nbytes, items, _device_ordinal(owner, device))


def _device_ordinal(obj: Any, device: int | None) -> int:
    if device is not None:
        return device
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is None:
        raise InvalidArgumentError(
            f"{type(obj).__name__} has no __dlpack_device__: give the buffer's device="
        )
    return int(dlpack_device()[1])


def host_outputs(batch: Any) -> list[np.ndarray]:
    """The buffers of a ``HostBatch`` as ``uint8`` views of its one allocation."""
    whole = np.frombuffer(batch, dtype=np.uint8)
    return [whole[a:b] for a, b in pairwise(batch.offsets)]


def to_host(obj: Any) -> np.ndarray:
    """Copies a device array to a host ``uint8`` array (CPU codec given device data)."""
    region = device_region(obj)
    if region.nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return cupy_module().asnumpy(device_bytes(region.ptr, region.nbytes, region.owner))


def device_bytes(ptr: int, nbytes: int, owner: Any) -> Any:
    """The ``nbytes`` device bytes at ``ptr``, which ``owner`` keeps alive, as
    a 1-D ``uint8`` CuPy array (the CPU backend given device data)."""
    cp = cupy_module()
    if cp is None:
        raise UnsupportedTypeError("device arrays on the CPU backend need CuPy")
    memory = cp.cuda.UnownedMemory(ptr, nbytes, owner)
    return cp.ndarray((nbytes,), cp.uint8, cp.cuda.MemoryPointer(memory, 0))


def to_device(arrays: Sequence[Any]) -> list[Any]:
    """Copies host results back to the device (CPU codec given device data)."""
    cp = cupy_module()
    return [cp.asarray(np.frombuffer(memoryview(a), dtype=np.uint8)) for a in arrays]


def item_sizes(sizes: Any) -> np.ndarray:
    """The item sizes of a packed batch as a contiguous ``uint64`` array, which
    the engine reads without converting each size to a Python int."""
    arr = np.asarray(sizes)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"sizes must be one-dimensional, not of shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    if arr.dtype.kind not in "iu":
        raise InvalidArgumentError(f"sizes must be integers, not {arr.dtype}")
    if arr.dtype.kind == "i" and arr.min() < 0:
        raise InvalidArgumentError(f"sizes must not be negative; item {int(arr.argmin())} is")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def item_ranges(offsets: Any, count: int, nbytes: int) -> np.ndarray:
    """Where the ``count`` items of a decode into one buffer of ``nbytes``
    bytes go, as an ``(count, 2)`` ``uint64`` array of ``(start, end)``:
    ``offsets`` is ``count + 1`` boundaries (item ``i`` at
    ``offsets[i]:offsets[i + 1]``, back to back) or ``count`` ``(start, end)``
    pairs (any order, gaps allowed). ``InvalidArgumentError`` naming the
    item that ends before it starts or past the buffer's end; overlaps are
    found where the regions are read (``check_disjoint``)."""
    arr = np.asarray(offsets)
    if arr.dtype.kind not in "iu" and arr.size > 0:
        raise InvalidArgumentError(f"offsets must be integers, not {arr.dtype}")
    if arr.ndim == 1 and arr.size == count + 1:
        arr = np.stack([arr[:-1], arr[1:]], axis=1)
    elif arr.shape != (count, 2):
        raise InvalidArgumentError(
            f"offsets of a batch of {count} buffers are {count + 1} boundaries or "
            f"{count} (start, end) pairs, not an array of shape {arr.shape}"
        )
    if arr.dtype.kind == "i" and arr.size > 0 and arr.min() < 0:
        item = int(np.flatnonzero((arr < 0).any(axis=1))[0])
        raise InvalidArgumentError(f"offsets: item {item} starts or ends at a negative offset")
    ranges = np.ascontiguousarray(arr, dtype=np.uint64).reshape(count, 2)
    backwards = np.flatnonzero(ranges[:, 1] < ranges[:, 0])
    if backwards.size:
        i = int(backwards[0])
        start, end = int(ranges[i, 0]), int(ranges[i, 1])
        raise InvalidArgumentError(
            f"offsets: item {i} ends at byte {end} before it starts at byte {start}"
        )
    beyond = np.flatnonzero(ranges[:, 1] > nbytes)
    if beyond.size:
        i = int(beyond[0])
        raise InvalidArgumentError(
            f"offsets: item {i} ends at byte {int(ranges[i, 1])}, past the end of out "
            f"({nbytes} bytes)"
        )
    return ranges


def packed_host(batch: Any) -> tuple[np.ndarray, np.ndarray]:
    """A ``HostBatch`` as ``(uint8 array of every buffer back to back, sizes)``."""
    offsets = np.frombuffer(batch.offsets_buffer(), dtype=np.uint64)
    return np.frombuffer(batch, dtype=np.uint8), np.diff(offsets)


def packed_device(batch: Any) -> tuple[Any, np.ndarray]:
    """A ``DeviceBatch`` as ``(device uint8 array of every buffer back to back,
    sizes)``: its allocation when the buffers lie without alignment gaps, else
    a compacted copy (which needs CuPy)."""
    ranges = batch_ranges(batch)
    sizes = ranges[:, 1] - ranges[:, 0]
    cp = cupy_module()
    if batch.is_packed:
        span = batch.span()
        return (span if cp is None else cp.asarray(span)), sizes
    if cp is None:
        raise UnsupportedTypeError(
            "this algorithm's device outputs are aligned with gaps between them; "
            "packing them needs CuPy"
        )
    with cp.cuda.Device(batch.device):
        return cp.concatenate([cp.asarray(a) for a in batch.arrays()]), sizes


def stream_handle(stream: Any) -> int | None:
    """The ``CUstream`` handle of ``stream``: None; an int (a raw handle: 0 the
    legacy default stream, 2 the per-thread one); an object with
    ``__cuda_stream__`` (CUDA Python's protocol: ``(version, handle)``); a
    CuPy stream (``.ptr``) or a PyTorch stream (``.cuda_stream``)."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise UnsupportedTypeError("stream must be a CUDA stream or a handle, not a bool")
    if isinstance(stream, int):
        if stream < 0:
            raise InvalidArgumentError(f"stream handle {stream} is negative")
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        value = protocol() if callable(protocol) else protocol
        if not (isinstance(value, tuple) and len(value) == 2):
            raise InvalidArgumentError(
                f"__cuda_stream__ of {type(stream).__name__} gave {value!r}, not (version, handle)"
            )
        return int(value[1])
    for attribute in ("ptr", "cuda_stream"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int) and not isinstance(handle, bool):
            return handle
    raise UnsupportedTypeError(
        f"stream must be None, an int handle, or a CUDA stream object "
        f"(__cuda_stream__, CuPy, PyTorch), not {type(stream).__name__}"
    )


def copy_into(out: Any, result: Any) -> Any:
    """Copies a packed ``result`` into ``out`` (on the same side, exactly as
    large) and returns ``out``."""
    if is_device(out) != is_device(result):
        raise InvalidArgumentError("out must be on the same side as the data (host or device)")
    if is_device(out):
        cp = cupy_module()
        if cp is None:
            raise UnsupportedTypeError("out= with device data needs CuPy")
        target = cp.asarray(out).reshape(-1).view(cp.uint8)
        source = cp.asarray(result)
    else:
        target = host_view(out, writable=True, what="out")
        source = result
    if target.nbytes != source.nbytes:
        raise InvalidArgumentError(
            f"out holds {target.nbytes} bytes; the result has {source.nbytes}"
        )
    target[...] = source
    return out
