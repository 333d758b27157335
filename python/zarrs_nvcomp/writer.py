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

import json
from collections.abc import Iterable
from typing import Any

from zarrs_nvcomp._args import checked_bool, checked_int
from zarrs_nvcomp._array_meta import attributes_json
from zarrs_nvcomp._create_args import (
    array_spec,
    dimension_names_arg,
    filters_arg,
    host_or_device,
)
from zarrs_nvcomp._stores import location
from zarrs_nvcomp._write import write_into
from zarrs_nvcomp._zarrs_nvcomp import (
    InvalidArgumentError,
    create_array_metadata,
)
from zarrs_nvcomp.reader import Array, open_array
from zarrs_nvcomp.types import StorageOptions

__all__ = ["create_array", "write_chunks_parallel"]

#: create_array's ``compressors`` and ``compressor`` when not given.
_UNSET: Any = object()


def _is_auto(compressors: Any) -> bool:
    return isinstance(compressors, str) and compressors == "auto"


def create_array(
    store: str,
    *,
    shape: int | tuple[int, ...] | None = None,
    dtype: Any = None,
    chunks: int | tuple[int, ...] | str = "auto",
    shards: tuple[int, ...] | None = None,
    compressors: Any = _UNSET,
    compressor: Any = _UNSET,
    zarr_format: int = 3,
    fill_value: Any = 0,
    data: Any = None,
    storage_options: StorageOptions | None = None,
    overwrite: bool = False,
    attributes: dict[str, Any] | None = None,
    dimension_names: Iterable[str | None] | None = None,
    filters: Any = None,
) -> Array:
    """Creates a zarr array at ``store`` (a path, ``file://``, ``s3://`` or
    ``memory://`` URL) and opens it; with ``data``, writes it too.

    ``shape`` and ``dtype`` (numbers or bool) are taken from ``data`` when
    not given. ``chunks``: the chunk shape (an integer for every side), or
    ``"auto"`` (the default): the array's shape with its longest side halved
    until a chunk holds at most 4 MiB (so 2 to 4 MiB for larger arrays).
    That is deliberately not zarr's ``"auto"``, which aims at chunks of
    128 KiB to about 1 MiB (a 1000 x 1000 float32 array: zarr (250, 500),
    here one chunk): nvCOMP's batches and object stores pay per chunk, and
    run best on chunks of megabytes. Give ``chunks`` for zarr's layout.
    With ``shards`` (the shard shape, a multiple of ``chunks``; zarr v3
    only), ``chunks`` is the inner chunk shape and must be given.
    ``compressors`` (zarr 3's name; ``compressor`` is the same): one
    compressor or a list of at most one: ``"zstd"`` (level 1, the default;
    zarr's ``"auto"`` means it too),
    ``"gzip"``, ``"lz4"``, ``"zlib"``, ``"blosc"`` (zarr's: zstd level 5,
    shuffled), a zarr codec (``zarr.codecs.ZstdCodec(level=3)``,
    ``BloscCodec``), a numcodecs codec or config (``NvCompBatchCodec("lz4")``,
    ``{"id": "zstd", "level": 3}``), zarr v3 codec metadata, or ``None``.
    An argument of the wrong kind raises
    `zarrs_nvcomp.UnsupportedTypeError`, one out of range
    `zarrs_nvcomp.InvalidArgumentError`.
    ``attributes``: the array's user attributes (JSON values), as zarr
    stores them (in ``zarr.json``; a v2 array's ``.zattrs``).
    ``dimension_names``: a name (or None) per dimension, zarr v3 only.
    ``filters``: codecs applied before the compressor, in the order they
    encode, as zarr takes them (numcodecs codecs or configurations such as
    ``numcodecs.Delta(dtype="<i4")``, zarr codecs such as
    ``zarr.codecs.TransposeCodec``, or v3 codec metadata). The reader
    decodes `delta`, `fixedscaleoffset`, `bitround` and `transpose` chains
    in batches and the others through zarrs; writes of filtered chains go
    through zarrs' codecs.
    An array or group already at ``store`` raises
    `zarrs_nvcomp.ContainsArrayError` or
    `zarrs_nvcomp.ContainsGroupError` (``ValueError``s, as zarr's),
    unless ``overwrite``: then everything at ``store`` is removed first
    (its metadata first), so no chunk of the old array is read as the new
    one's.

    All or nothing: the metadata is checked before anything is written (zarrs
    opens it, and one element goes through its codecs and back), so a
    compressor its codec refuses raises `zarrs_nvcomp.InvalidArgumentError`,
    an ``nvcomp_batch`` algorithm that only a GPU runs (cascaded, bitcomp,
    ans) raises `zarrs_nvcomp.GpuUnavailableError` where no GPU is
    usable, and whatever was at ``store`` is left as it was, also with
    ``overwrite``. ``memory://name``
    URLs name this process's in-memory store, kept while the process runs;
    ``file://`` URLs are taken as written, as zarr takes them.
    """
    if compressors is not _UNSET and compressor is not _UNSET:
        raise InvalidArgumentError("give compressors or compressor, not both")
    chosen = compressors if compressors is not _UNSET else compressor
    data = host_or_device(data)
    spec = array_spec(
        shape=shape,
        dtype=dtype,
        chunks=chunks,
        shards=shards,
        # zarr's "auto" is its default for the format: here, the default.
        compressor="zstd" if chosen is _UNSET or _is_auto(chosen) else chosen,
        zarr_format=zarr_format,
        fill_value=fill_value,
        data=data,
    )
    spec["overwrite"] = checked_bool("overwrite", overwrite)
    spec["attributes"] = json.loads(attributes_json(dict(attributes or {})))
    spec["dimension_names"] = dimension_names_arg(dimension_names)
    spec["filters"] = filters_arg(filters)
    url, options = location(store, storage_options)
    array = Array(create_array_metadata(url, spec, options), options, read_only=False)
    if data is not None and data.size:
        write_into(array, data)
    return array


def write_chunks_parallel(
    store: str | Array,
    data: Any,
    selection: Any = (),
    *,
    storage_options: StorageOptions | None = None,
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
    Errors: `IndexError` for bad selections, `ValueError` for
    data of the wrong shape, `zarrs_nvcomp.StoreError` naming the
    chunk's key when a put (or a chunk file's write) fails.
    """
    write_empty_chunks = checked_bool("write_empty_chunks", write_empty_chunks)
    max_concurrent_requests = checked_int("max_concurrent_requests", max_concurrent_requests)
    array = open_array(store, storage_options)
    return write_into(
        array,
        data,
        selection,
        device=device,
        write_empty_chunks=write_empty_chunks,
        max_concurrent_requests=max_concurrent_requests,
    )
