"""Dask arrays backed by the batched reader.

>>> import zarrs_nvcomp
>>> x = zarrs_nvcomp.to_dask("s3://bucket/field.zarr", storage_options={"anon": True})
>>> x.mean().compute()                           # each task: one batched read

Each block of the Dask array is read by one task with one call of the
reader (one batched decode per wave of chunks), on its worker's GPU or CPU,
and stays where it was decoded: with ``device="cuda"`` (or ``None`` on a
machine with a usable GPU and CuPy) blocks are CuPy arrays and the array's
``meta`` is one. With ``dask_cuda.LocalCUDACluster`` each worker sees its own
GPU as device 0, so the same graph spreads over every GPU of the cluster.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarrs_nvcomp._buffers import cupy_module
from zarrs_nvcomp._read_out import resolve_device
from zarrs_nvcomp.reader import Array, open_array
from zarrs_nvcomp.types import StorageOptions

__all__ = ["DEFAULT_BLOCK_BYTES", "to_dask"]

#: The size the default blocks approach, in bytes of decoded data.
DEFAULT_BLOCK_BYTES = 256 << 20


def to_dask(
    store: Any,
    chunks: Any = None,
    *,
    storage_options: StorageOptions | None = None,
    device: str | None = None,
) -> Any:
    """A Dask array of the zarr array at ``store`` (a URL, a zarr or obstore
    store, a ``zarr.Array`` or an opened `zarrs_nvcomp.Array`).

    ``chunks``: Dask's chunks of the array (anything ``dask.array`` takes);
    ``None`` blocks of whole stored chunks (shards for sharded arrays) of
    about `DEFAULT_BLOCK_BYTES`. Blocks that cut stored chunks read
    those chunks in every block that needs them.

    ``device``: where each task decodes and keeps its block, as in
    `zarrs_nvcomp.read_chunks_parallel`; ``None`` is resolved here, on
    the client: the GPU (``"cuda"``, device 0 of each worker) when it is
    usable and CuPy is installed, else the CPU.
    """
    try:
        import dask.array as da
        from dask.base import tokenize
    except ImportError as e:
        raise ImportError(
            "to_dask needs Dask: pip install 'zarrs-nvcomp[dask]'", name=e.name
        ) from e

    array = open_array(store, storage_options)
    dtype = array.dtype
    device = resolve_device(device, dtype)
    if chunks is None:
        chunks = default_chunks(array.shape, array.chunks, dtype.itemsize)
    blocks = _BlockReader(array, device)
    name = "zarrs-nvcomp-" + tokenize(
        array.url, sorted(array._storage_options.items()), device, chunks, array.shape, str(dtype)
    )
    return da.from_array(
        blocks,
        chunks=chunks,
        name=name,
        asarray=False,
        fancy=False,
        lock=False,
        meta=_meta(array.ndim, dtype, device),
    )


def default_chunks(
    shape: tuple[int, ...],
    stored: tuple[int, ...],
    itemsize: int,
    target_bytes: int = DEFAULT_BLOCK_BYTES,
) -> tuple[int, ...]:
    """Blocks of whole stored chunks: from the last axis to the first, each
    axis takes as many stored chunks as keep the block within
    ``target_bytes`` (at least one chunk; at most the whole axis)."""
    block = [max(1, min(c, n)) for c, n in zip(stored, shape, strict=True)]
    for axis in reversed(range(len(block))):
        others = math.prod(block) // block[axis] * itemsize
        per_chunk = others * block[axis]
        chunks_on_axis = max(1, math.ceil(shape[axis] / block[axis]))
        fit = max(1, target_bytes // max(per_chunk, 1))
        block[axis] = min(block[axis] * min(fit, chunks_on_axis), max(shape[axis], 1))
        if fit < chunks_on_axis:
            break
    return tuple(block)


class _BlockReader:
    """What ``dask.array.from_array`` slices: reads a block with one call of
    the reader. Pickles as the array's URL and options and the device."""

    __slots__ = ("array", "device")

    def __init__(self, array: Array, device: str) -> None:
        self.array = array
        self.device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def ndim(self) -> int:
        return self.array.ndim

    def __getitem__(self, selection: Any) -> Any:
        return self.array.read(selection, device=self.device)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_BlockReader, (self.array, self.device))


def _meta(ndim: int, dtype: np.dtype, device: str) -> Any:
    """An empty array of the blocks' type: CuPy for device reads."""
    if device.startswith("cuda"):
        cp = cupy_module()
        if cp is not None:
            return cp.empty((0,) * ndim, dtype=dtype)
    return np.empty((0,) * ndim, dtype=dtype)
