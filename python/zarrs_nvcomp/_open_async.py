"""Awaitable opens and reads by URL or store: `open_array_async` and
`read_chunks_parallel_async`, the metadata and the chunks read by the
library's own tasks (``python/src/awaitable.rs``) while the event loop
runs on."""

from __future__ import annotations

import asyncio
from typing import Any

from zarrs_nvcomp._local_paths import check_array_path
from zarrs_nvcomp._stores import location
from zarrs_nvcomp._zarrs_nvcomp import ReaderArray
from zarrs_nvcomp.reader import _MODES, Array, open_array
from zarrs_nvcomp.types import StorageOptions

__all__ = ["open_array_async", "read_chunks_parallel_async"]


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
