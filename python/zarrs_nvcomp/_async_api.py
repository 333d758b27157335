"""Awaitable opens, reads and writes by URL or store: `open_array_async`,
`read_chunks_parallel_async` and `write_chunks_parallel_async`, the
metadata and the chunks read and written by the library's own tasks
(``python/src/awaitable.rs``) while the event loop runs on."""

from __future__ import annotations

import asyncio
from typing import Any

from zarrs_nvcomp._local_paths import check_array_path
from zarrs_nvcomp._stores import location
from zarrs_nvcomp._zarrs_nvcomp import ReaderArray
from zarrs_nvcomp.reader import _MODES, Array, open_array
from zarrs_nvcomp.types import StorageOptions

__all__ = ["open_array_async", "read_chunks_parallel_async", "write_chunks_parallel_async"]


async def open_array_async(
    store: Any, storage_options: StorageOptions | None = None, *, mode: str = "r+"
) -> Array:
    """`open_array` as an awaitable: the metadata is read by the library's
    own tasks while the event loop runs on."""
    if isinstance(store, Array) or mode not in _MODES:
        # Nothing to read, or an error to raise: as open_array does.
        return open_array(store, storage_options, mode=mode)
    url, options = location(store, storage_options)
    check_array_path(url)
    inner = await ReaderArray.open_async(asyncio.get_running_loop(), url, options)
    return Array(inner, options, read_only=mode == "r")


async def read_chunks_parallel_async(
    store: Any,
    selection: Any = (),
    *,
    storage_options: StorageOptions | None = None,
    **read_options: Any,
) -> Any:
    """`read_chunks_parallel` as an awaitable (`open_array_async`, then
    `Array.read_async`): the same arguments but ``progress`` and ``out``,
    the same results and errors; no thread waits for the read, and
    cancelling the awaiting task stops it."""
    array = await open_array_async(store, storage_options)
    return await array.read_async(selection, **read_options)


async def write_chunks_parallel_async(
    store: Any,
    data: Any,
    selection: Any = (),
    *,
    storage_options: StorageOptions | None = None,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
) -> tuple[int, int]:
    """`write_chunks_parallel` as an awaitable: the same arguments, result
    and errors; no thread waits for the write. Cancelling the awaiting task
    stops it; each chunk is then the old one or the new one (a put, or a
    file renamed over the old one), never a mix."""
    array = await open_array_async(store, storage_options)
    return await array.write_async(
        data,
        selection,
        device=device,
        write_empty_chunks=write_empty_chunks,
        max_concurrent_requests=max_concurrent_requests,
    )
