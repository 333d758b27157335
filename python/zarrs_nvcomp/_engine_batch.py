"""The codec pipeline's batch calls: stored chunks of a batched chain
decoded, and chunks encoded as stored, each batch in one call into Rust,
which checks and removes (or adds) the chain's framing and checks each
chunk's size, as the reader does."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._batched_chain import BatchedChain
from zarrs_nvcomp._zarrs_nvcomp import decode_stored_into, encode_stored

__all__ = ["chunk_key", "decode_stored", "encode_for_store", "engine_decode", "engine_encode"]


async def decode_stored(
    chain: BatchedChain,
    dtype: np.dtype,
    specs: list[Any],
    stored: list[Any],
    keys: list[str],
    *,
    on_device: bool,
) -> list[Any]:
    """The stored chunks (zarr buffers) decoded in one call, each an array
    of its spec's shape and ``dtype`` (CuPy when ``on_device``).
    `DecodeError` naming the chunk and the codec for a chunk that
    fails its checksum, cannot be decoded or decodes to the wrong size."""
    if not stored:
        return []
    sizes = [math.prod(spec.shape) * dtype.itemsize for spec in specs]
    decoded = await engine_decode(chain, [_host_bytes(c) for c in stored], keys, on_device, sizes)
    return [chain.chunk(data, dtype, spec.shape) for spec, data in zip(specs, decoded, strict=True)]


async def encode_for_store(chain: BatchedChain, chunks: list[np.ndarray]) -> list[bytes]:
    """Host chunks encoded in one call, in the chain's stored order, framed
    as stored."""
    if not chunks:
        return []
    return await engine_encode(chain, [chain.stored_bytes(c) for c in chunks])


#: Alignment of each decoded chunk in the batch's allocation: any element
#: type can view it.
_ALIGN = 256


async def engine_decode(
    chain: BatchedChain,
    stored: list[np.ndarray],
    keys: list[str],
    on_device: bool,
    sizes: list[int],
) -> list[Any]:
    """Decodes the stored chunks ``stored`` (host memory, as stored), which
    decode to ``sizes`` bytes, in one call into one allocation: on the
    current CUDA device (CuPy), or in host memory on the CPU (NumPy).
    Errors name chunk ``i`` by ``keys[i]`` and the codec."""
    names = [f"{key} ({chain.codec})" for key in keys]
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += -(-size // _ALIGN) * _ALIGN
    if on_device:
        cp = _buffers.cupy_module()
        out = cp.empty(end, dtype=cp.uint8)
        region = _buffers.device_region(out, what="out")
        device = f"cuda:{cp.cuda.Device().id}"
        target = {"device_out": (region.ptr, end), "keep_alive": out}
    else:
        out = np.empty(end, dtype=np.uint8)
        device, target = "cpu", {"host_out": out}
    loop = asyncio.get_running_loop()
    await decode_stored_into(chain.verdict, stored, names, offsets, sizes, device, loop, **target)
    return [out[o : o + n] for o, n in zip(offsets, sizes, strict=True)]


async def engine_encode(chain: BatchedChain, chunks: list[np.ndarray]) -> list[bytes]:
    """Encodes host ``chunks`` in one call on the CPU, in parallel, framed as
    stored (zarr hands the pipeline host values; the GPU pays off for large
    batches of device data only)."""
    return await encode_stored(chain.verdict, chunks, asyncio.get_running_loop())


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
