"""The codec pipeline's writes of batched chains: the chunks a write only
partly covers are fetched concurrently and decoded in one engine call, merged
with the new values as zarr merges them, and every chunk is encoded in one
engine call (on the CPU, in parallel) and stored concurrently; chunks left
all fill value are deleted unless ``write_empty_chunks``."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
from zarr.core.buffer import cpu

from zarrs_nvcomp._batched_chain import BatchedChain
from zarrs_nvcomp._engine_batch import chunk_key, decode_stored, encode_for_store
from zarrs_nvcomp._zarr_compat import fill_value_or_default, merge_chunk_array

__all__ = ["write_batched"]


async def write_batched(
    chain: BatchedChain,
    dtype: np.dtype,
    items: list[Any],
    value: Any,
    drop_axes: tuple[int, ...],
) -> None:
    """Writes ``value`` (a zarr NDBuffer, host or device) to the chunks of
    ``items`` (byte setter, spec, chunk selection, value selection,
    complete), merging new values into chunks as zarr does."""
    # Merged and encoded on the host: one copy of a device value, not one per chunk.
    value = cpu.NDBuffer.from_numpy_array(value.as_numpy_array())
    specs = [dataclasses.replace(spec, prototype=cpu.buffer_prototype) for _, spec, *_ in items]
    partial = [i for i, (*_, complete) in enumerate(items) if not complete]
    fetched = await asyncio.gather(
        *(items[i][0].get(prototype=cpu.buffer_prototype) for i in partial)
    )
    encoded = await _merge_and_encode(
        chain,
        dtype,
        items,
        specs,
        partial,
        fetched,
        value,
        drop_axes,
    )

    async def store(setter: Any, data: bytes | None) -> None:
        if data is None:
            await setter.delete()
        else:
            await setter.set(cpu.Buffer.from_bytes(data))

    await asyncio.gather(*(store(item[0], data) for item, data in zip(items, encoded, strict=True)))


async def _merge_and_encode(
    chain: BatchedChain,
    dtype: np.dtype,
    items: list[Any],
    specs: list[Any],
    partial: list[int],
    fetched: list[Any],
    value: Any,
    drop_axes: tuple[int, ...],
) -> list[bytes | None]:
    """Each chunk's new bytes, or None for a chunk to delete."""
    present = [(i, chunk) for i, chunk in zip(partial, fetched, strict=True) if chunk is not None]
    decoded = await decode_stored(
        chain,
        dtype,
        [specs[i] for i, _ in present],
        [chunk for _, chunk in present],
        [chunk_key(items[i][0]) for i, _ in present],
        on_device=False,
    )
    existing: dict[int, Any] = {
        i: cpu.NDBuffer.from_numpy_array(chunk)
        for (i, _), chunk in zip(present, decoded, strict=True)
    }
    chunks: list[np.ndarray | None] = []
    for i, (_, _, chunk_selection, out_selection, complete) in enumerate(items):
        spec = specs[i]
        merged = merge_chunk_array(
            existing.get(i), value, out_selection, spec, chunk_selection, complete, drop_axes
        )
        if not spec.config.write_empty_chunks and merged.all_equal(fill_value_or_default(spec)):
            chunks.append(None)
        else:
            chunks.append(np.asarray(merged.as_numpy_array(), dtype=dtype))
    kept = [i for i, chunk in enumerate(chunks) if chunk is not None]
    encoded = await encode_for_store(chain, [chunks[i] for i in kept])
    result: list[bytes | None] = [None] * len(items)
    for i, data in zip(kept, encoded, strict=True):
        result[i] = data
    return result
