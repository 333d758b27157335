"""The chunk-parallel writer: writes a selection of a zarr array (v2 or v3)
from host (NumPy) or GPU (CuPy, ``__cuda_array_interface__``, DLPack) memory
to a local directory or an object store, encoding every chunk of a wave in
one batch call (one nvCOMP batch on the GPU, the CPU backend in parallel
otherwise) and storing the chunks with concurrent puts (a local array's
chunk files written in parallel by the writer itself, each beside its file
and renamed over it).

>>> import numpy as np, zarrs_nvcomp
>>> a = zarrs_nvcomp.create_array("/data/out.zarr", shape=(4096, 4096), dtype="float32",
...                               chunks=(512, 512), compressor="zstd")
>>> a[:1024] = np.ones((1024, 4096), dtype=np.float32)
>>> zarrs_nvcomp.write_chunks_parallel("/data/out.zarr", cupy_array, (slice(1024, None), ...))

Chains written in batches: ``nvcomp_batch`` (every algorithm), ``zstd``,
``gzip``, numcodecs ``lz4`` and ``zlib``, optionally followed by ``crc32c``;
other chains (sharding, blosc, filters, ...) are encoded by zarrs' codec
chain on the CPU, chunk by chunk, and stored the same way. Chunks the
selection covers in part are read and merged first. Chunks equal to the fill
value are not stored (stored ones are deleted) unless
``write_empty_chunks=True``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._args import checked_bool, checked_int
from zarrs_nvcomp._stores import location
from zarrs_nvcomp._zarrs_nvcomp import (
    InvalidArgumentError,
    SelectionError,
    UnsupportedTypeError,
    create_array_metadata,
    write_chunks,
)
from zarrs_nvcomp.reader import Array, _normalize, open_array

__all__ = ["create_array", "write_chunks_parallel"]

#: Compressors named by a string, as zarr v3 codec metadata.
_NAMED = {
    "zstd": {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
    "lz4": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
    "zlib": {"name": "numcodecs.zlib", "configuration": {"level": 1}},
}


def _compressor_metadata(compressor: Any) -> dict[str, Any] | None:
    """``compressor`` (a name, zarr v3 codec metadata, a numcodecs config or
    codec, an ``NvCompBatchCodec``) as zarr v3 codec metadata."""
    if compressor is None:
        return None
    if isinstance(compressor, str):
        if compressor in _NAMED:
            return _NAMED[compressor]
        raise InvalidArgumentError(
            f"unknown compressor {compressor!r}; named ones: {sorted(_NAMED)}"
        )
    if hasattr(compressor, "get_config"):  # a numcodecs codec, NvCompBatchCodec included
        compressor = compressor.get_config()
    if isinstance(compressor, dict) and "name" in compressor:
        return dict(compressor)
    if isinstance(compressor, dict) and "id" in compressor:
        config = {k: v for k, v in compressor.items() if k != "id"}
        name = compressor["id"]
        if name in ("lz4", "zlib", "blosc", "bz2", "lzma"):
            name = f"numcodecs.{name}"
        return {"name": name, "configuration": config}
    raise UnsupportedTypeError(
        f"compressor must be a name, a codec or its metadata, not {compressor!r}"
    )


def _fill_value_json(fill_value: Any, dtype: np.dtype) -> Any:
    """``fill_value`` as zarr writes it in metadata."""
    value = np.asarray(fill_value, dtype=dtype).item()
    if isinstance(value, complex):
        return [
            _fill_value_json(value.real, np.dtype("f8")),
            _fill_value_json(value.imag, np.dtype("f8")),
        ]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def create_array(
    store: str,
    *,
    shape: tuple[int, ...],
    dtype: Any,
    chunks: tuple[int, ...],
    shards: tuple[int, ...] | None = None,
    compressor: Any = "zstd",
    zarr_format: int = 3,
    fill_value: Any = 0,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Array:
    """Creates a zarr array at ``store`` (a path, ``file://``, ``s3://`` or
    ``memory://`` URL) and opens it.

    ``dtype``: numbers or bool. ``chunks``: the chunk shape (the inner chunk
    shape with ``shards``, the shard shape, a multiple of it; zarr v3 only).
    ``compressor``: ``"zstd"`` (level 1, the default), ``"gzip"``, ``"lz4"``,
    ``"zlib"``, a numcodecs codec or config (``NvCompBatchCodec("lz4")``,
    ``{"id": "zstd", "level": 3}``), zarr v3 codec metadata, or ``None``.
    An array or group already at ``store`` raises
    :class:`zarrs_nvcomp.ContainsArrayError` (a ``ValueError``, as zarr's),
    unless ``overwrite``: then everything at ``store`` is removed first
    (its metadata first), so no chunk of the old array is read as the new
    one's.

    All or nothing: the metadata is checked before anything is written (zarrs
    opens it, and one element goes through its codecs and back), so a
    compressor its codec refuses raises :class:`zarrs_nvcomp.InvalidArgumentError`,
    an ``nvcomp_batch`` algorithm that only a GPU runs (cascaded, bitcomp,
    ans) raises :class:`zarrs_nvcomp.GpuUnavailableError` where no GPU is
    usable, and whatever was at ``store`` is left as it was, also with
    ``overwrite``. ``memory://name``
    URLs name this process's in-memory store, kept while the process runs;
    ``file://`` URLs are taken as written, as zarr takes them.
    """
    dt = np.dtype(dtype)
    if dt.kind not in "biufc":
        raise UnsupportedTypeError(f"create_array makes arrays of numbers or bool, not {dt}")
    spec = {
        "shape": [int(n) for n in shape],
        "chunks": [int(n) for n in chunks],
        "shards": None if shards is None else [int(n) for n in shards],
        "data_type": dt.newbyteorder("=").name if dt.kind != "b" else "bool",
        "fill_value": _fill_value_json(fill_value, dt),
        "compressor": _compressor_metadata(compressor),
        "zarr_format": int(zarr_format),
        "overwrite": bool(overwrite),
    }
    url, options = location(store, storage_options)
    create_array_metadata(url, spec, options)
    return open_array(url, options)


def write_chunks_parallel(
    store: str | Array,
    data: Any,
    selection: Any = (),
    *,
    storage_options: dict[str, Any] | None = None,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
) -> tuple[int, int]:
    """Writes ``data`` into ``selection`` (NumPy basic indexing with steps of
    1; the whole array by default) of the zarr array at ``store``.

    ``data``: a NumPy array (or anything NumPy takes), or a GPU array
    (CuPy, ``__cuda_array_interface__``, DLPack), broadcast to the
    selection's shape and cast to the array's data type. ``device``: where
    to encode: ``None`` (the GPU for GPU data, and for host data when one is
    usable), ``"cpu"`` or ``"cuda"``/``"cuda:N"``; GPU data needs a GPU.

    Returns ``(chunks stored, chunks equal to the fill value)``; the latter
    are not stored (stored ones are deleted) unless ``write_empty_chunks``.
    Errors: :class:`IndexError` for bad selections, :class:`ValueError` for
    data of the wrong shape, :class:`zarrs_nvcomp.StoreError` naming the
    chunk's key when a put (or a chunk file's write) fails.
    """
    write_empty_chunks = checked_bool("write_empty_chunks", write_empty_chunks)
    max_concurrent_requests = checked_int("max_concurrent_requests", max_concurrent_requests)
    array = open_array(store, storage_options)
    strided, flips, out_shape = _normalize(selection, array.shape)
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
