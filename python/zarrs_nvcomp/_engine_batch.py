"""The codec pipeline's engine calls: stored chunks of a batched chain
decoded (framing checked and removed) and chunks encoded (framing added),
each batch in one call of the engine."""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import numpy as np

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._batched_chain import BatchedChain
from zarrs_nvcomp._zarrs_nvcomp import (
    DecodeError,
    Engine,
    decode_blosc_into,
    decode_host_to_device,
)

__all__ = ["chunk_key", "decode_stored", "encode_for_store", "engine_decode", "engine_encode"]


def decode_stored(
    chain: BatchedChain,
    dtype: np.dtype,
    specs: list[Any],
    stored: list[Any],
    keys: list[str],
    *,
    on_device: bool,
) -> list[Any]:
    """The stored chunks (zarr buffers) decoded in one engine call, each an
    array of its spec's shape and ``dtype`` (CuPy when ``on_device``).
    :class:`DecodeError` naming the chunk and the codec for a chunk that
    fails its checksum, cannot be decoded or decodes to the wrong size."""
    if not stored:
        return []
    raw = [_host_bytes(chunk) for chunk in stored]
    bodies = [
        chain.framing.body(chunk, key, chain.codec) for chunk, key in zip(raw, keys, strict=True)
    ]
    sizes = [math.prod(spec.shape) * dtype.itemsize for spec in specs]
    # zlib trailers: checked on the device by the engine's GPU decode,
    # on the host here after a CPU decode.
    adler32 = [chain.framing.adler32(chunk) for chunk in raw] if chain.framing.zlib else None
    decoded = engine_decode(chain, bodies, keys, on_device, sizes, adler32)
    chunks = []
    for spec, chunk, key, data, expected in zip(specs, raw, keys, decoded, sizes, strict=True):
        if data.nbytes != expected:
            raise DecodeError(
                f"chunk {key} ({chain.codec}) decodes to {data.nbytes} bytes, "
                f"its shape {spec.shape} needs {expected} bytes"
            )
        if not on_device:
            chain.framing.check_decoded(chunk, data, key, chain.codec)
        chunks.append(chain.chunk(data, dtype, spec.shape))
    return chunks


def encode_for_store(chain: BatchedChain, chunks: list[np.ndarray]) -> list[bytes]:
    """Host chunks encoded in one engine call, in the chain's stored order,
    framed as stored."""
    if not chunks:
        return []
    flat = [chain.stored(c) for c in chunks]
    encoded = engine_encode(chain, flat)
    return [chain.framing.frame(body, data) for body, data in zip(encoded, flat, strict=True)]


def engine_decode(
    chain: BatchedChain,
    bodies: list[np.ndarray],
    keys: list[str],
    on_device: bool,
    sizes: list[int],
    adler32: list[int] | None = None,
) -> list[Any]:
    """Decodes ``bodies`` (host memory), which decode to ``sizes`` bytes, in
    one call: into one device allocation on the current CUDA device, or into
    host memory on the CPU. Blosc chunks are decoded by the reader's blosc
    decoder, which checks their sizes; the engine's results are checked by
    the caller, but for ``adler32`` (the Adler-32 each body's decoded bytes
    must have), which the GPU checks on the device."""
    if chain.config_json is None:
        return _blosc_decode([f"{key} ({chain.codec})" for key in keys], bodies, sizes, on_device)
    try:
        if on_device:
            cp = _buffers.cupy_module()
            engine = _engine(chain.config_json, f"cuda:{cp.cuda.Device().id}")
            return _buffers.device_outputs(decode_host_to_device(engine, bodies, adler32))
        return _buffers.host_outputs(_engine(chain.config_json, "cpu").decode(bodies))
    except DecodeError as e:
        raise DecodeError(_name_chunks(str(e), keys, chain.codec)) from None


#: Alignment of each decoded blosc chunk in the batch's allocation: any
#: element type can view it.
_ALIGN = 256


def _blosc_decode(
    names: list[str], bodies: list[np.ndarray], sizes: list[int], on_device: bool
) -> list[Any]:
    """Blosc chunks decoded in one call of the reader's blosc decoder, into
    one allocation (NumPy, or CuPy on the current device); errors name
    chunk ``i`` by ``names[i]``."""
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += -(-size // _ALIGN) * _ALIGN
    if on_device:
        cp = _buffers.cupy_module()
        out = cp.empty(end, dtype=cp.uint8)
        region = _buffers.device_region(out, what="out")
        device = f"cuda:{cp.cuda.Device().id}"
        decode_blosc_into(bodies, names, offsets, sizes, device, device_out=(region.ptr, end))
    else:
        out = np.empty(end, dtype=np.uint8)
        decode_blosc_into(bodies, names, offsets, sizes, "cpu", host_out=out)
    return [out[o : o + n] for o, n in zip(offsets, sizes, strict=True)]


def engine_encode(chain: BatchedChain, chunks: list[np.ndarray]) -> list[bytes]:
    """Encodes host ``chunks`` in one call on the CPU, in parallel (zarr
    hands the pipeline host values; the GPU pays off for large batches of
    device data only)."""
    return _engine(chain.config_json, "cpu").encode(chunks).to_bytes_list()


@functools.cache
def _engine(config_json: str, device: str) -> Engine:
    return Engine(json.loads(config_json), device)


_BUFFER = re.compile(r"\bbuffer (\d+)\b")


def _name_chunks(message: str, keys: list[str], codec: str) -> str:
    """The engine's message with each ``buffer i`` replaced by the chunk's key."""

    def key(match: re.Match[str]) -> str:
        i = int(match.group(1))
        return f"chunk {keys[i]} ({codec})" if i < len(keys) else match.group(0)

    return _BUFFER.sub(key, message)


def chunk_key(getter: Any) -> str:
    """The store key of a chunk (a shard's inner chunk: its coordinates)."""
    path = getattr(getter, "path", None)
    if path is not None:
        return str(path)
    coords = getattr(getter, "chunk_coords", None)
    return f"inner chunk {tuple(coords)}" if coords is not None else repr(getter)


def _host_bytes(buffer: Any) -> np.ndarray:
    """A chunk's stored bytes as a flat ``uint8`` host array (a shard's
    inner chunks may be GPU buffers under ``enable_gpu()``)."""
    return np.ascontiguousarray(buffer.as_numpy_array()).reshape(-1).view(np.uint8)
