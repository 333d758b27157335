"""Progress reports of reads: ``progress=True`` shows a bar (tqdm when
installed, a line on stderr otherwise) once a read has taken more than
`DELAY` seconds; ``progress=callable`` calls ``callable(done_bytes,
total_bytes)``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from zarrs_nvcomp._zarrs_nvcomp import UnsupportedTypeError

#: Seconds a read runs before ``progress=True`` shows anything.
DELAY = 1.0

ProgressCallback = Callable[[int, int], Any]


def human_size(nbytes: int) -> str:
    """``nbytes`` in the largest binary unit it has one of: ``"1.0 GiB"``, ``"512 B"``."""
    size, unit = float(nbytes), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"


class _Bar:
    """``progress=True``: a tqdm bar over the output's bytes, or without tqdm
    a percentage rewritten in place on stderr, at most ten times a second."""

    def __init__(self, desc: str) -> None:
        self._desc = desc
        self._tqdm: Any = None
        self._start = time.monotonic()
        self._last_line = 0.0
        self._shown = False
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        self._tqdm = tqdm(
            total=0, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, delay=DELAY
        )

    def __call__(self, done: int, total: int) -> None:
        if self._tqdm is not None:
            if self._tqdm.total != total:
                self._tqdm.total = total
            self._tqdm.update(done - self._tqdm.n)
            return
        now = time.monotonic()
        if now - self._start < DELAY or (now - self._last_line < 0.1 and done < total):
            return
        self._last_line, self._shown = now, True
        percent = 100.0 * done / total if total else 100.0
        sys.stderr.write(f"\r{self._desc}: {percent:5.1f}% of {human_size(total)}")
        sys.stderr.flush()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_with_progress(
    progress: bool | ProgressCallback | None, desc: str, read: Callable[[Any], Any]
) -> Any:
    """Runs ``read(callback)`` with the callback ``progress`` asks for (None
    for no report)."""
    if progress is None or progress is False:
        return read(None)
    if progress is True:
        bar = _Bar(desc)
        try:
            return read(bar)
        finally:
            bar.close()
    if not callable(progress):
        raise UnsupportedTypeError(
            f"progress must be True, False, None or a callable(done_bytes, total_bytes), "
            f"not {type(progress).__name__}"
        )
    return read(progress)
