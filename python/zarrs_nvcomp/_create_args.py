"""create_array's arguments checked and put as the core's array spec takes
them: zarr's spellings (``shape=5``, ``chunks="auto"``, ``compressors=[codec]``,
zarr codec objects, ``data=``) made plain, and any value of the wrong kind or
range an `InvalidArgumentError` or `UnsupportedTypeError`
naming the argument, never a built-in error."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarrs_nvcomp._buffers import is_device
from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError, UnsupportedTypeError

__all__ = ["AUTO_CHUNK_BYTES", "array_spec", "auto_chunks"]

#: The most bytes a chunk that ``chunks="auto"`` picks holds (see `auto_chunks`).
AUTO_CHUNK_BYTES = 4 << 20

#: The longest axis of an array or chunk: NumPy's sizes are signed 64-bit.
AXIS_MAX = 2**63 - 1

#: Compressors named by a string, as zarr v3 codec metadata (blosc's is made per data type).
_NAMED = {
    "zstd": {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
    "lz4": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
    "zlib": {"name": "numcodecs.zlib", "configuration": {"level": 1}},
    "blosc": None,
}


def shape_arg(name: str, value: Any, *, minimum: int) -> list[int]:
    """``value`` (an integer, or a sequence of them, each at least ``minimum``) as a list."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_):
        value = (value,)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise UnsupportedTypeError(
            f"{name} must be an integer or a sequence of integers, not {value!r}"
        )
    sides = []
    for n in value:
        if isinstance(n, bool | np.bool_) or not isinstance(n, numbers.Integral):
            raise UnsupportedTypeError(f"{name} must hold integers, not {n!r}")
        if not minimum <= int(n) <= AXIS_MAX:
            raise InvalidArgumentError(
                f"{name} sides must be from {minimum} to {AXIS_MAX} (NumPy's longest axis): {n}"
            )
        sides.append(int(n))
    return sides


def auto_chunks(shape: Sequence[int], itemsize: int) -> list[int]:
    """The chunk shape ``chunks="auto"`` picks: the array's shape, its longest
    side halved (rounding up) until a chunk holds at most
    `AUTO_CHUNK_BYTES` (4 MiB), so chunks of arrays larger than that
    hold 2 to 4 MiB, the size nvCOMP's batches and object stores both like."""
    chunks = [max(1, n) for n in shape]
    while math.prod(chunks) * itemsize > AUTO_CHUNK_BYTES and max(chunks) > 1:
        longest = chunks.index(max(chunks))
        chunks[longest] = -(-chunks[longest] // 2)
    return chunks


def _dtype(dtype: Any, data: Any) -> np.dtype:
    if dtype is None:
        if data is None:
            raise InvalidArgumentError("create_array needs dtype, or data to take it from")
        dtype = data.dtype
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise UnsupportedTypeError(f"dtype {dtype!r} is not a NumPy data type: {e}") from e
    if dt.kind not in "biufc":
        raise UnsupportedTypeError(f"create_array makes arrays of numbers or bool, not {dt}")
    return dt


def _fill_value_json(fill_value: Any, dtype: np.dtype) -> Any:
    """``fill_value`` as zarr writes it in metadata."""
    try:
        value = np.asarray(0 if fill_value is None else fill_value, dtype=dtype)
    except (OverflowError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"fill_value {fill_value!r} is not a {dtype}: {e}") from e
    if value.shape != ():
        raise InvalidArgumentError(f"fill_value must be one value, not {fill_value!r}")
    item = value.item()
    if isinstance(item, complex):
        return [
            _fill_value_json(item.real, np.dtype("f8")),
            _fill_value_json(item.imag, np.dtype("f8")),
        ]
    if isinstance(item, float) and not math.isfinite(item):
        return "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
    return item


def _one_compressor(compressors: Any) -> Any:
    """zarr 3's ``compressors`` (one codec, or a list of at most one) as one or None."""
    if isinstance(compressors, list | tuple):
        if len(compressors) > 1:
            raise InvalidArgumentError(
                f"create_array takes one compressor, not {len(compressors)}: {compressors!r}"
            )
        return compressors[0] if compressors else None
    return compressors


def _blosc(dtype: np.dtype, zarr_format: int) -> dict[str, Any]:
    """zarr's default blosc: zstd level 5, bit-shuffled for bytes, shuffled otherwise."""
    bits = dtype.itemsize == 1
    if zarr_format == 2:  # numcodecs counts the shuffles
        config = {"cname": "zstd", "clevel": 5, "shuffle": 2 if bits else 1, "blocksize": 0}
        return {"name": "numcodecs.blosc", "configuration": config}
    shuffle = "bitshuffle" if bits else "shuffle"
    config = {"cname": "zstd", "clevel": 5, "shuffle": shuffle, "typesize": dtype.itemsize}
    return {"name": "blosc", "configuration": config | {"blocksize": 0}}


def _compressor_metadata(
    compressor: Any, dtype: np.dtype, zarr_format: int
) -> dict[str, Any] | None:
    """``compressor`` (a name, zarr v3 codec metadata or codec, a numcodecs
    config or codec, an ``NvCompBatchCodec``) as zarr v3 codec metadata."""
    if compressor is None:
        return None
    if isinstance(compressor, str):
        if compressor == "blosc":
            return _blosc(dtype, zarr_format)
        if compressor in _NAMED:
            return _NAMED[compressor]
        raise InvalidArgumentError(
            f"unknown compressor {compressor!r}; named ones: {sorted(_NAMED)}"
        )
    metadata = _codec_metadata(compressor, numcodecs_ids=_NUMCODECS_COMPRESSORS)
    if metadata is None:
        raise UnsupportedTypeError(
            f"compressor must be a name, a codec or its metadata, not {compressor!r}"
        )
    return metadata


#: numcodecs compressors whose zarr v3 names are ``numcodecs.<id>`` (the
#: others, zstd and gzip, are zarr v3 codecs of the same name).
_NUMCODECS_COMPRESSORS = ("lz4", "zlib", "blosc", "bz2", "lzma")


def _codec_metadata(codec: Any, *, numcodecs_ids: tuple[str, ...] | None) -> dict[str, Any] | None:
    """``codec`` (a numcodecs codec or configuration, a zarr 3 codec, zarr v3
    codec metadata) as zarr v3 codec metadata, a numcodecs ``id`` in
    ``numcodecs_ids`` (every one for None) named ``numcodecs.<id>``; None
    for anything else."""
    if hasattr(codec, "get_config"):  # a numcodecs codec, NvCompBatchCodec included
        codec = codec.get_config()
    elif hasattr(codec, "to_dict"):  # a zarr 3 codec (zarr.codecs.ZstdCodec, ...)
        codec = codec.to_dict()
    if isinstance(codec, dict) and "name" in codec:
        return dict(codec)
    if isinstance(codec, dict) and "id" in codec:
        config = {k: v for k, v in codec.items() if k != "id"}
        name = codec["id"]
        if numcodecs_ids is None or name in numcodecs_ids:
            name = f"numcodecs.{name}"
        return {"name": name, "configuration": config}
    return None


def host_or_device(data: Any) -> Any:
    """``data`` as an array with ``shape`` and ``dtype``: GPU arrays as they
    are, anything else through NumPy."""
    if data is None or is_device(data):
        return data
    try:
        return np.asarray(data)
    except (TypeError, ValueError) as e:
        raise UnsupportedTypeError(f"data is not an array: {e}") from e


def array_spec(
    *,
    shape: Any,
    dtype: Any,
    chunks: Any,
    shards: Any,
    compressor: Any,
    zarr_format: Any,
    fill_value: Any,
    data: Any,
) -> dict[str, Any]:
    """The core's spec of the array create_array is asked for (``data``: the
    array `host_or_device` made, or None)."""
    if data is not None:
        if shape is not None and shape_arg("shape", shape, minimum=0) != list(data.shape):
            raise InvalidArgumentError(f"shape {shape!r} is not data's shape {data.shape}")
        shape = data.shape
    if shape is None:
        raise InvalidArgumentError("create_array needs shape, or data to take it from")
    sides = shape_arg("shape", shape, minimum=0)
    dt = _dtype(dtype, data)
    if isinstance(zarr_format, bool | np.bool_) or zarr_format not in (2, 3):
        raise InvalidArgumentError(f"zarr_format must be 2 or 3, not {zarr_format!r}")
    shard_sides = None if shards is None else shape_arg("shards", shards, minimum=1)
    if isinstance(chunks, str) and chunks == "auto":
        if shard_sides is not None:
            raise InvalidArgumentError('chunks="auto" picks no chunks inside shards; give chunks')
        chunk_sides = auto_chunks(sides, dt.itemsize)
    elif isinstance(chunks, numbers.Integral) and not isinstance(chunks, bool | np.bool_):
        chunk_sides = shape_arg("chunks", [chunks] * len(sides), minimum=1)
    else:
        chunk_sides = shape_arg("chunks", chunks, minimum=1)
    return {
        "shape": sides,
        "chunks": chunk_sides,
        "shards": shard_sides,
        "data_type": dt.newbyteorder("=").name if dt.kind != "b" else "bool",
        "fill_value": _fill_value_json(fill_value, dt),
        "compressor": _compressor_metadata(_one_compressor(compressor), dt, int(zarr_format)),
        "zarr_format": int(zarr_format),
    }


def dimension_names_arg(names: Any) -> list[str | None] | None:
    """``dimension_names`` as a list of names or None (the core checks that
    there is one per dimension and that the format has them)."""
    if names is None:
        return None
    if isinstance(names, str):
        raise UnsupportedTypeError("dimension_names must be a sequence of names, not one string")
    listed = list(names)
    for name in listed:
        if name is not None and not isinstance(name, str):
            raise UnsupportedTypeError(f"dimension names must be strings or None, not {name!r}")
    return listed


def filters_arg(filters: Any) -> list[dict[str, Any]]:
    """``filters`` (None, or a list of numcodecs codecs or configurations,
    zarr codecs or zarr v3 codec metadata) as zarr v3 codec metadata, in
    the order they encode; a numcodecs codec ``X`` is ``numcodecs.X``."""
    if filters is None:
        return []
    if isinstance(filters, str | dict) or not isinstance(filters, list | tuple):
        filters = [filters]
    listed = []
    for codec in filters:
        metadata = _codec_metadata(codec, numcodecs_ids=None)
        if metadata is None:
            raise UnsupportedTypeError(f"filters must be codecs or their metadata, not {codec!r}")
        listed.append(metadata)
    return listed
