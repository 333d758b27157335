"""Awaitable reads (`zarrs_nvcomp.Array.read_async`,
`zarrs_nvcomp.read_chunks_parallel_async`): the arguments checked as the
blocking read checks them, the read run as a task of the library's tokio
runtime that resolves an asyncio future of the caller's loop
(``python/src/awaitable.rs``), and its result made as the blocking read
makes it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from zarrs_nvcomp._cpu_path import warn_cpu_path
from zarrs_nvcomp._read_call import read_call
from zarrs_nvcomp._read_out import empty_result

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
    call = read_call(
        array, selection, device=device, max_concurrent_requests=max_concurrent_requests,
        trusted_input=trusted_input, max_decoded_size=max_decoded_size, out=out,
    )  # fmt: skip
    if call.empty:
        return empty_result(call.out_shape, call.dtype, call.device) if out is None else out
    if call.lent is not None and call.flips:
        # The reader writes ascending selections: flip a copy into out.
        out[...] = await read_async(array, selection, **call.options())
        return out
    data = await array._inner.read_async(
        asyncio.get_running_loop(),
        call.strided,
        call.device,
        call.max_concurrent_requests,
        trusted_input=call.trusted_input,
        max_decoded_size=call.max_decoded_size,
        # The task holds out until it ends, even if cancelled.
        **({} if call.lent is None else {**call.lent.arguments(), "keep_alive": out}),
    )
    warn_cpu_path(array.url, call.requested, call.device, array.fallback_reason)
    return out if call.lent is not None else call.result(data)
