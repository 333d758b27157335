"""Data, timing and options shared by the Python benchmarks."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


def field_f32(nbytes: int, seed: int = 0) -> np.ndarray:
    """About ``nbytes`` of a float32 2-D random walk rounded to 0.01 (seeded):
    compressible like a geoscience field."""
    cols = 4096
    rows = max(1, nbytes // (4 * cols))
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((rows, cols), dtype=np.float32)
    steps *= np.float32(0.1)
    field = np.cumsum(steps, axis=1, dtype=np.float32)
    field += np.cumsum(rng.standard_normal(rows, dtype=np.float32))[:, None]
    return np.round(field, 2)


def best_of(
    fn: Callable[[], Any],
    repeats: int,
    sync: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """The best time of ``repeats`` calls of ``fn`` (each followed by ``sync``),
    after one warm-up call; ``clock``: wall time, or ``time.process_time`` for
    host-only work on a loaded machine (the time others' processes take the
    cores from this one is not counted)."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        sync()
        best = min(best, clock() - t0)
    return best


def bench_parser(doc: str, stored: str, repeats: int = 3) -> argparse.ArgumentParser:
    """An argument parser described by the first line of ``doc``, with the
    options of the benchmarks that write their data once: ``--dir`` (where
    ``stored`` written, kept and reused) and ``--repeats``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, help=f"where the {stored} written (kept, reused)"
    )
    parser.add_argument("--repeats", type=int, default=repeats)
    return parser


@contextlib.contextmanager
def data_dir(directory: Path | None, prefix: str) -> Iterator[Path]:
    """``directory`` (created where missing, kept), or else a temporary
    directory named ``prefix...``, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = directory or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        yield root
