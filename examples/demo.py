"""`make demo`: writes a sample zarr array with zarr-python, reads it back with
zarrs_nvcomp.read_chunks_parallel (on the GPU when there is one, otherwise on
the CPU), checks it against zarr-python's own read and prints both throughputs.

    python examples/demo.py [--size-mb 256] [--dir DIR] [--repeats 3]

The sample is a float32 random-walk field rounded to 0.01, zstd level 1, in
1 MiB chunks, written under a temporary directory (or DIR, kept and reused).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs
import zarrs_nvcomp

COLUMNS = 2048  # 8 KiB rows
CHUNK_ROWS = 128  # 1 MiB chunks


def sample(size_mb: int, seed: int = 0) -> np.ndarray:
    """A smooth float32 field: a random walk down the rows of a random walk
    along the columns, rounded to 0.01."""
    rows = max(CHUNK_ROWS, size_mb * (1 << 20) // (4 * COLUMNS))
    rng = np.random.default_rng(seed)
    data = np.empty((rows, COLUMNS), dtype=np.float32)
    data[0] = np.cumsum(rng.standard_normal(COLUMNS, dtype=np.float32))
    block = 4096
    for start in range(1, rows, block):
        stop = min(rows, start + block)
        steps = rng.standard_normal((stop - start, COLUMNS), dtype=np.float32) * 0.1
        np.cumsum(steps, axis=0, out=steps)
        data[start:stop] = data[start - 1] + steps
    return np.round(data, 2)


def write(path: Path, size_mb: int) -> None:
    marker = path / "zarr.json"
    if marker.exists():
        z = zarr.open_array(str(path), mode="r")
        if z.nbytes == sample_nbytes(size_mb):
            print(f"reusing {path}")
            return
    t0 = time.perf_counter()
    data = sample(size_mb)
    z = zarr.create_array(
        str(path),
        shape=data.shape,
        chunks=(CHUNK_ROWS, COLUMNS),
        dtype=data.dtype,
        compressors=zarr.codecs.ZstdCodec(level=1),
        overwrite=True,
    )
    z[...] = data
    stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(
        f"wrote {path}: shape {data.shape} float32, {data.nbytes / 2**20:.0f} MiB, "
        f"{stored / 2**20:.0f} MiB stored (ratio {data.nbytes / stored:.2f}), "
        f"{time.perf_counter() - t0:.1f} s"
    )


def sample_nbytes(size_mb: int) -> int:
    rows = max(CHUNK_ROWS, size_mb * (1 << 20) // (4 * COLUMNS))
    return rows * COLUMNS * 4


def best_of(repeats: int, fn):
    fn()  # warm-up (page cache, GPU context, thread pools)
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size-mb", type=int, default=256, help="decoded size (default 256)"
    )
    parser.add_argument("--dir", type=Path, help="where to write the sample (kept)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zarrs-nvcomp-demo-") as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"field-{args.size_mb}mb.zarr"
        write(path, args.size_mb)

        try:
            import cupy
        except ImportError:
            cupy = None
        gpu_reason = zarrs_nvcomp.gpu_unavailable_reason(0)
        device = "cuda" if gpu_reason is None and cupy is not None else "cpu"
        if device == "cpu":
            why = gpu_reason or "CuPy is not installed"
            print(f"reading on the CPU ({os.cpu_count()} cores): {why}")
        else:
            print("reading on the GPU")
        array = zarrs_nvcomp.open_array(str(path))
        print(
            f"codec chain: {[c['name'] for c in array.codecs]}, batched: {array.batched_algorithm}"
        )

        def ours():
            out = array.read(..., device=device)
            if device == "cuda":
                cupy.cuda.runtime.deviceSynchronize()
            return out

        z = zarr.open_array(str(path), mode="r")
        t_ours, got = best_of(args.repeats, ours)
        t_zarr, want = best_of(args.repeats, lambda: z[...])

        host = cupy.asnumpy(got) if device == "cuda" else got
        if not np.array_equal(host, want):
            raise SystemExit("MISMATCH: read_chunks_parallel differs from zarr-python")
        gb = want.nbytes / 1e9
        print(
            f"read_chunks_parallel ({device}): {gb / t_ours:6.2f} GB/s ({t_ours:.3f} s)"
        )
        print(f"zarr-python (cpu):        {gb / t_zarr:6.2f} GB/s ({t_zarr:.3f} s)")
        print(
            f"ratio: {t_zarr / t_ours:.2f}x; results identical ({want.nbytes / 2**20:.0f} MiB)"
        )


if __name__ == "__main__":
    main()
