"""Errors of a part of a batch, renumbered to the whole batch's buffers."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["batch_indices"]


class batch_indices:
    """Renumbers the buffers an error names from a part of a batch to the
    whole batch: ``indices[i]`` is the batch index of the part's buffer ``i``."""

    _BUFFER = re.compile(r"\bbuffer (\d+)\b")

    def __init__(self, indices: list[int]) -> None:
        self._indices = indices

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, err: BaseException | None, _tb: Any) -> None:
        if err is None or not err.args or not isinstance(err.args[0], str):
            return

        def renumber(match: re.Match[str]) -> str:
            i = int(match.group(1))
            return f"buffer {self._indices[i]}" if i < len(self._indices) else match.group(0)

        err.args = (self._BUFFER.sub(renumber, err.args[0]), *err.args[1:])
