"""Awaitable reads (`zarrs_nvcomp.Array.read_async`,
`zarrs_nvcomp.read_chunks_parallel_async`): the arguments checked as the
blocking read checks them, the read run as a task of the library's tokio
runtime that resolves an asyncio future of the caller's loop
(``python/src/awaitable.rs``), and its result made as the blocking read
makes it."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from zarrs_nvcomp._args import checked_bool, checked_int
from zarrs_nvcomp._cpu_path import warn_cpu_path
from zarrs_nvcomp._read_out import empty_result, lent_output, read_result, resolve_device
from zarrs_nvcomp._selection import normalize

if TYPE_CHECKING:
    from zarrs_nvcomp.reader import Array


async def read_async(
    array: Array,
    selection: Any,
    device: str | None,
    max_concurrent_requests: int | None,
    trusted_input: bool,
    max_decoded_size: int | None,
    out: Any = None,
) -> Any:
    """`Array.read_async` of ``array``."""
    dtype = array.dtype
    requested = device
    max_concurrent_requests = checked_int("max_concurrent_requests", max_concurrent_requests)
    trusted_input = checked_bool("trusted_input", trusted_input)
    max_decoded_size = checked_int("max_decoded_size", max_decoded_size)
    strided, flips, out_shape = normalize(selection, array.shape)
    lent = None if out is None else lent_output(out, out_shape, dtype, device)
    device = resolve_device(device, dtype) if lent is None else lent.device
    if math.prod(out_shape) == 0:
        return empty_result(out_shape, dtype, device) if out is None else out
    options = (device, max_concurrent_requests, trusted_input, max_decoded_size)
    if lent is not None and flips:
        # The reader writes ascending selections: flip a copy into out.
        out[...] = await read_async(array, selection, *options)
        return out
    data = await array._inner.read_async(
        asyncio.get_running_loop(),
        strided,
        device,
        max_concurrent_requests,
        trusted_input=trusted_input,
        max_decoded_size=max_decoded_size,
        # The task holds out until it ends, even if cancelled.
        **({} if lent is None else {**lent.arguments(), "keep_alive": out}),
    )
    warn_cpu_path(array.url, requested, device, array.fallback_reason)
    if lent is not None:
        return out
    return read_result(data, strided, flips, out_shape, dtype, device)
