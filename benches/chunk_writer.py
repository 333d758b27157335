"""A chunk-parallel writer for the benchmarks' large arrays: zarr writes the
metadata, a process pool compresses (numcodecs Zstd, as zarr's ``zstd``
codec does) and writes each chunk's file directly, so tens of GiB take
seconds per GiB per core rather than zarr's chunk-by-chunk writes.

The data is a float32 random walk along the rows, rounded to 0.01, with a
different seed per chunk: compressible like a geoscience field (ratio about
2 at zstd level 1).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from itertools import product
from pathlib import Path

import numcodecs
import numpy as np
import zarr
from zarr.codecs import ZstdCodec

ZSTD_LEVEL = 1


def chunk_data(shape: tuple[int, int], seed: int) -> np.ndarray:
    """One chunk of the field (seeded)."""
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal(shape, dtype=np.float32)
    steps *= np.float32(0.1)
    field = np.cumsum(steps, axis=1, dtype=np.float32)
    field += np.float32(rng.standard_normal() * 10)
    return np.round(field, 2)


def _write_chunk(job: tuple[str, tuple[int, int], tuple[int, int]]) -> int:
    array_dir, chunks, index = job
    data = chunk_data(chunks, seed=index[0] * 1_000_003 + index[1])
    path = Path(array_dir, "c", *map(str, index))
    path.parent.mkdir(parents=True, exist_ok=True)
    encoded = numcodecs.Zstd(level=ZSTD_LEVEL).encode(data)
    path.write_bytes(encoded)
    return len(encoded)


def write_field(
    root: Path,
    name: str,
    shape: tuple[int, int],
    chunks: tuple[int, int],
    processes: int | None = None,
) -> int:
    """Writes the float32 field ``name`` (dimensions ``y``, ``x``, so that
    xarray opens the group at ``root`` as a dataset) in a zarr v3 group at
    ``root``, zstd level 1; returns the compressed bytes. ``shape`` must be a
    whole number of ``chunks``."""
    if any(n % c for n, c in zip(shape, chunks, strict=True)):
        raise ValueError(f"shape {shape} is not a whole number of chunks {chunks}")
    group = zarr.open_group(root, mode="a", zarr_format=3)
    group.create_array(
        name,
        shape=shape,
        chunks=chunks,
        dtype="<f4",
        compressors=[ZstdCodec(level=ZSTD_LEVEL)],
        dimension_names=("y", "x"),
        fill_value=0.0,
        overwrite=True,
    )
    array_dir = str(Path(root, name))
    grid = [range(n // c) for n, c in zip(shape, chunks, strict=True)]
    jobs = [(array_dir, chunks, index) for index in product(*grid)]
    # spawn: the parent may hold threads (tokio, rayon) that fork would not copy.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes or os.cpu_count(), mp_context=context) as pool:
        return sum(pool.map(_write_chunk, jobs, chunksize=32))
