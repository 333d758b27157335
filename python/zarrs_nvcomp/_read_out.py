"""Where a read's result goes: the device a read resolves to, the
caller's ``out=`` memory, checked against the read before the reader is
given it, and the reader's device memory as CuPy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarrs_nvcomp._buffers import cupy_module
from zarrs_nvcomp._zarrs_nvcomp import (
    CudaArray,
    InvalidArgumentError,
    UnsupportedTypeError,
    gpu_unavailable_reason,
    parse_device,
)

__all__ = [
    "LentOutput",
    "device_result",
    "empty_result",
    "flip_index",
    "lent_output",
    "resolve_device",
]


def resolve_device(device: str | None, dtype: np.dtype) -> str:
    """The device a read of ``dtype`` elements runs on: ``device`` checked,
    or for None the GPU where it is usable, CuPy is installed and CuPy has
    the data type, else the CPU."""
    if device is None:
        # CuPy has no datetime, timedelta, bytes, unicode or void arrays.
        on_gpu = dtype.kind in "biufc"
        if on_gpu and cupy_module() is not None and gpu_unavailable_reason(0) is None:
            return "cuda:0"
        return "cpu"
    if not isinstance(device, str):
        raise UnsupportedTypeError(f"device must be a string or None, not {type(device).__name__}")
    return parse_device(device)


class LentOutput:
    """An ``out=`` array checked for a read: the device it is read on and
    what the reader is given, host bytes or a device region (whose producer
    stream was waited for)."""

    __slots__ = ("device", "host", "region")

    def __init__(self, device: str, host: np.ndarray | None, region: Any) -> None:
        self.device = device
        self.host = host
        self.region = region

    def arguments(self) -> dict[str, Any]:
        if self.host is not None:
            return {"host_out": self.host}
        return {"device_out": (self.region.ptr, self.region.nbytes)}


def lent_output(
    out: Any, shape: tuple[int, ...], dtype: np.dtype, device: str | None
) -> LentOutput:
    """Checks ``out`` for a read of ``shape`` elements of ``dtype`` on
    ``device`` (None: where ``out`` lives); raises ValueError naming what is
    wrong."""

    def bad(why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"out {why}")

    if isinstance(out, np.ndarray):
        on_device = False
    elif hasattr(out, "__cuda_array_interface__"):
        on_device = True
    else:
        raise bad(
            f"must be a NumPy array or a device array with __cuda_array_interface__, "
            f"not {type(out).__name__}"
        )
    requested = "auto" if device is None else resolve_device(device, dtype)
    interface = out.__cuda_array_interface__ if on_device else None
    if not on_device:
        if requested not in ("cpu", "auto"):
            raise bad(f"is a NumPy array (host memory); a read on {requested} needs a device array")
        where = "cpu"
    elif requested == "cpu":
        raise bad('is device memory; a read on the CPU (device="cpu") needs a NumPy array')
    else:
        ordinal = _device_ordinal(out)
        if ordinal is None:
            # The reader checks that the memory is the device's.
            where = "cuda:0" if requested == "auto" else requested
        else:
            where = f"cuda:{ordinal}"
        if requested not in ("auto", where):
            raise bad(f"is memory of {where}, not of the read's device {requested}")
    if tuple(out.shape) != tuple(shape):
        raise bad(f"has shape {tuple(out.shape)}, the selection has shape {tuple(shape)}")
    out_dtype = np.dtype(out.dtype) if hasattr(out, "dtype") else np.dtype(interface["typestr"])
    if out_dtype != dtype:
        raise bad(f"has dtype {out_dtype}, the array has dtype {dtype}")
    if not _c_contiguous(out, interface, dtype.itemsize):
        raise bad("is not C-contiguous")
    if interface is None:
        if not out.flags.writeable:
            raise bad("is read-only")
        return LentOutput(where, out.reshape(-1).view(np.uint8), None)
    if interface.get("data", (0, False))[1]:
        raise bad("is read-only")
    from zarrs_nvcomp._buffers import device_region

    return LentOutput(where, None, device_region(out, what="out"))


def _device_ordinal(out: Any) -> int | None:
    """The CUDA device of a device array, where it says (CuPy's ``device.id``,
    `CudaArray`'s ``device``); None otherwise."""
    device = getattr(out, "device", None)
    ordinal = getattr(device, "id", device)
    return ordinal if isinstance(ordinal, int) and not isinstance(ordinal, bool) else None


def _c_contiguous(out: Any, interface: dict[str, Any] | None, itemsize: int) -> bool:
    flags = getattr(out, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    strides = None if interface is None else interface.get("strides")
    if strides is None:
        return True
    expected = itemsize
    for n, stride in zip(reversed(tuple(out.shape)), reversed(tuple(strides)), strict=True):
        if n != 1 and stride != expected:
            return False
        expected *= n
    return True


def flip_index(flips: tuple[int, ...], ndim: int) -> tuple[slice, ...]:
    """The index that reverses the axes ``flips``."""
    return tuple(slice(None, None, -1) if axis in flips else slice(None) for axis in range(ndim))


def empty_result(shape: tuple[int, ...], dtype: np.dtype, device: str) -> Any:
    """An empty result of ``shape`` on ``device`` (CuPy for a GPU)."""
    if device in ("cpu", "auto"):
        return np.empty(shape, dtype=dtype)
    cp = cupy_module()
    if cp is None:
        raise UnsupportedTypeError("an empty device result needs CuPy")
    with cp.cuda.Device(_ordinal(device)):
        return cp.empty(shape, dtype=dtype)


def _ordinal(device: str) -> int:
    return int(device.partition(":")[2] or 0)


def device_result(
    data: CudaArray,
    shape: tuple[int, ...],
    dtype: np.dtype,
    flips: tuple[int, ...],
    out_shape: tuple[int, ...],
) -> Any:
    """A CuPy array over the reader's device memory (kept alive by the CuPy
    array), flipped on the GPU; without CuPy the `CudaArray` itself,
    reshaped."""
    cp = cupy_module()
    if cp is None:
        if flips:
            raise UnsupportedTypeError(
                "negative steps on device results need CuPy; read with device='cpu'"
            )
        return data if out_shape == shape else data.reshape(list(out_shape))
    with cp.cuda.Device(data.device):
        memory = cp.cuda.UnownedMemory(data.ptr, max(data.nbytes, 1), data, data.device)
        arr = cp.ndarray(shape, dtype=dtype, memptr=cp.cuda.MemoryPointer(memory, 0))
        if flips:
            arr = cp.ascontiguousarray(arr[flip_index(flips, len(shape))])
        return arr.reshape(out_shape)


def read_result(
    data: Any,
    strided: list[tuple[int, int, int]],
    flips: tuple[int, ...],
    out_shape: tuple[int, ...],
    dtype: np.dtype,
    device: str,
) -> Any:
    """The result of a read of ``strided`` (ascending ranges) that returned
    ``data`` (a `CudaArray`, or a host buffer): NumPy or GPU elements of
    ``dtype``, the axes ``flips`` reversed, of the selection's shape
    ``out_shape``."""
    shape = tuple(len(range(*s)) for s in strided)
    if isinstance(data, CudaArray):
        return device_result(data, shape, dtype, flips, out_shape)
    if device not in ("cpu", "auto"):
        raise RuntimeError("the reader returned host memory for a device read")
    arr = np.frombuffer(data, dtype=dtype).reshape(shape)
    if flips:
        arr = np.ascontiguousarray(arr[flip_index(flips, len(shape))])
    return arr.reshape(out_shape)
