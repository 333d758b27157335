"""The end of an awaitable read or write: the library's task hands its result
to the asyncio future the caller awaits, on the future's event loop
(``python/src/awaitable.rs``)."""

from __future__ import annotations

import asyncio
from typing import Any


def resolve(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    """Sets ``future``'s result (``value``) or exception (``error``), unless
    it is done already: cancelled while the task ran."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
