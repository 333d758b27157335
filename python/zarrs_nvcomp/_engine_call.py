"""One engine call of a batch method, made blocking or awaited.

A codec method decides its call once (which engine, which inputs, what turns
the engine's result into the method's); ``encode_batch`` runs it on the
caller's thread, ``encode_batch_async`` awaits it, the work on the library's
own threads (``python/src/awaitable.rs``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EngineCall"]


def _unchanged(result: Any) -> Any:
    return result


@dataclass(frozen=True)
class EngineCall:
    """``finish(method(*args))``: ``method`` an engine method that takes an
    event loop after ``args`` to return a future of it instead of its
    result. ``keep_alive`` owns the device memory the call reads: held here
    while a blocking call runs, handed to an awaited one (which holds it
    until its work ends, even when the caller stops waiting)."""

    method: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    finish: Callable[[Any], Any] = _unchanged
    keep_alive: Any = None

    @classmethod
    def done(cls, result: Any) -> EngineCall:
        """A call whose result is known without the engine (an empty batch)."""
        return cls(None, (result,))

    def run(self) -> Any:
        """The result, computed on this thread."""
        if self.method is None:
            return self.args[0]
        return self.finish(self.method(*self.args))

    async def run_async(self) -> Any:
        """The result, awaited: no Python thread waits for the engine."""
        if self.method is None:
            return self.args[0]
        loop = asyncio.get_running_loop()
        if self.keep_alive is None:
            pending = self.method(*self.args, loop)
        else:
            pending = self.method(*self.args, loop, self.keep_alive)
        return self.finish(await pending)
