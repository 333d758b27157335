"""zarrs-nvcomp: NVIDIA nvCOMP's batched GPU compression for numcodecs and zarr.

One codec, `NvCompBatchCodec` (numcodecs id ``"nvcomp_batch"``), that
compresses or decompresses a whole list of buffers per call: with nvCOMP on a
CUDA GPU when one is usable, otherwise with byte-compatible CPU libraries in
parallel. ``zarrs_nvcomp.zarr3.NvCompBatchZarrCodec`` is the zarr 3 codec of
the same name, which hands every chunk zarr gives it to one batch call.

`read_chunks_parallel` and `open_array` (``zarrs_nvcomp.reader``)
read a selection of a whole zarr array from a local directory or an object
store, fetching its chunks concurrently and decoding them in batches.

Every exception the package raises derives from `ZarrsNvcompError`
and from the built-in exception it stands for: `InvalidArgumentError`
is a ``ValueError``, `StoreError` an ``OSError``,
`StoreTimeoutError` a ``TimeoutError``, `UnsupportedTypeError`
a ``TypeError``, `SelectionError` an ``IndexError``,
`OutOfMemoryError` a ``MemoryError``, `ContainsArrayError` (an
array already where ``create_array`` is to make one) a ``ValueError``;
`DecodeError`, `GpuUnavailableError` and `CudaError` are
``RuntimeError``.
"""

import contextlib
import importlib
import importlib.metadata
import sys
from typing import TYPE_CHECKING

from zarrs_nvcomp import _nvcomp_wheel
from zarrs_nvcomp._async_api import (
    open_array_async,
    read_chunks_parallel_async,
    write_chunks_parallel_async,
)
from zarrs_nvcomp._buffers import device_views
from zarrs_nvcomp._zarrs_nvcomp import (
    ALGORITHMS,
    CPU_ALGORITHMS,
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    CudaError,
    DecodeError,
    GpuUnavailableError,
    InvalidArgumentError,
    NodeTypeValidationError,
    OutOfMemoryError,
    SelectionError,
    StoreTimeoutError,
    UnsupportedTypeError,
    ZarrsNvcompError,
    _set_gpu_worker_command,
    default_max_decoded_size,
    gpu_unavailable_reason,
    nvcomp_library_candidates,
    nvcomp_library_path,
    set_nvcomp_library_path,
)
from zarrs_nvcomp.numcodecs import NvCompBatchCodec
from zarrs_nvcomp.reader import (
    Array,
    CpuPathWarning,
    CudaArray,
    StoreError,
    open_array,
    read_chunks_parallel,
)
from zarrs_nvcomp.writer import create_array, write_chunks_parallel

if TYPE_CHECKING:
    # Loaded on first use at run time (__getattr__); type checkers see them.
    from zarrs_nvcomp.dask import to_dask
    from zarrs_nvcomp.pipeline import NvcompCodecPipeline as NvcompCodecPipeline
    from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec as NvCompBatchZarrCodec

# Hand the wheel's nvCOMP to the Rust loader before anything opens it. A
# re-import finds it opened already, which is not an error.
if (_wheel_library := _nvcomp_wheel.wheel_library()) is not None:
    with contextlib.suppress(RuntimeError):
        set_nvcomp_library_path(str(_wheel_library))

__all__ = [
    "ALGORITHMS",
    "CPU_ALGORITHMS",
    "Array",
    "ArrayNotFoundError",
    "ContainsArrayError",
    "ContainsGroupError",
    "CpuPathWarning",
    "CudaArray",
    "CudaError",
    "DecodeError",
    "GpuUnavailableError",
    "InvalidArgumentError",
    "NodeTypeValidationError",
    "NvCompBatchCodec",
    "OutOfMemoryError",
    "SelectionError",
    "StoreError",
    "StoreTimeoutError",
    "UnsupportedTypeError",
    "ZarrsNvcompError",
    "create_array",
    "default_max_decoded_size",
    "device_views",
    "gpu_available",
    "gpu_unavailable_reason",
    "nvcomp_library_candidates",
    "nvcomp_library_path",
    "open_array",
    "open_array_async",
    "read_chunks_parallel",
    "read_chunks_parallel_async",
    "set_zarr_batch_size",
    "to_dask",
    "write_chunks_parallel",
    "write_chunks_parallel_async",
]
# NvCompBatchZarrCodec and NvcompCodecPipeline need zarr, an optional
# dependency: they load on first use (see __getattr__), and are not in
# __all__, so that `from zarrs_nvcomp import *` works without zarr.

#: The installed package's version.
__version__ = importlib.metadata.version("zarrs-nvcomp")


# Untrusted batches are decoded on the GPU by a worker process: this
# interpreter, running zarrs_nvcomp._gpu_worker.
if sys.executable:
    _set_gpu_worker_command([sys.executable, "-m", "zarrs_nvcomp._gpu_worker"])


def gpu_available(device: int = 0) -> bool:
    """Whether CUDA device ``device`` can run nvCOMP (see `gpu_unavailable_reason`)."""
    return gpu_unavailable_reason(device) is None


def set_zarr_batch_size(batch_size: int | None = None):
    """Sets zarr's ``codec_pipeline.batch_size`` (zarr 3), so that zarr hands
    many chunks at once to the ``nvcomp_batch`` codec, which decodes them in one
    batch call. ``None`` means every chunk of a read or write request, in calls
    of up to 65,536 chunks.

    Works as a statement and as a context manager (restoring the old value)::

        zarrs_nvcomp.set_zarr_batch_size()          # from now on
        with zarrs_nvcomp.set_zarr_batch_size(256):  # only inside the block
            ...

    zarr reads the setting when an array is opened, so set it before opening.
    """
    return _zarr_part("zarr3", "set_batch_size")(batch_size)


def _zarr_part(module: str, name: str):
    """``name`` of the module ``zarrs_nvcomp.<module>``, which needs zarr:
    without it, an ImportError naming the extra that installs it."""
    try:
        loaded = importlib.import_module(f"zarrs_nvcomp.{module}")
    except ImportError as e:
        if e.name == "zarr" or (e.name or "").startswith("zarr."):
            raise ImportError(
                f"zarrs_nvcomp.{name} needs zarr-python 3: pip install 'zarrs-nvcomp[zarr]'",
                name=e.name,
            ) from e
        raise
    return getattr(loaded, name)


def __getattr__(name: str):
    # zarr and Dask are optional: their modules load on first use.
    if name == "NvcompCodecPipeline":
        return _zarr_part("pipeline", name)
    if name == "NvCompBatchZarrCodec":
        return _zarr_part("zarr3", name)
    if name == "to_dask":
        from zarrs_nvcomp.dask import to_dask

        return to_dask
    raise AttributeError(f"module 'zarrs_nvcomp' has no attribute {name!r}")
