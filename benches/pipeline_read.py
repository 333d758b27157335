"""``NvcompCodecPipeline`` against ``read_chunks_parallel`` on the same
arrays, one per chain the reader batches: sharded, blosc, delta,
fixedscaleoffset, transpose, big-endian, plain; same run, methods taking
turns. Prints GB/s of each and the ratio pipeline / reader (target: 0.8 or
more).

    python benches/pipeline_read.py [--small] [--size-mb 256] [--dir DIR] [--repeats 5]
                                    [--store local|memory]

With a usable GPU and CuPy, both read into GPU memory: the pipeline under
``zarr.config.enable_gpu()``, the reader with ``device="cuda"``; without
one, both on the CPU. ``--small`` writes 4 MiB arrays (a check that the
script runs). Times are the median of --repeats after a warm-up; the arrays
(float32, or int32 for delta, 1 MiB chunks; the sharded one 64 KiB inner
chunks in 4 MiB shards) are written once by zarr into DIR (a temporary
directory by default). With ``--store memory`` the pipeline reads a copy of
each array in a ``zarr.storage.MemoryStore``, which the reader cannot open:
the chunks zarr's store API fetches are decoded as stored
(``decode_stored_chunks_into``) where the chain allows it, by zarr's own
pipeline otherwise; the reader still reads the local array.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import zarr
import zarr.codecs as zc
import zarrs_nvcomp
from zarr.core.buffer import cpu
from zarrs_nvcomp._buffers import cupy_module

PIPELINE = {"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}
COLUMNS = 1024
ZSTD = [zc.ZstdCodec(level=1)]

#: Each chain: its dtype and zarr.create_array's codec arguments.
CHAINS = {
    "sharded": ("<f4", {"compressors": ZSTD, "shard_rows": 1024, "chunk_rows": 16}),
    "blosc": ("<f4", {"compressors": [zc.BloscCodec(cname="lz4", shuffle="shuffle")]}),
    "delta": (
        "<i4",
        {
            "filters": numcodecs.Delta(dtype="<i4"),
            "compressors": numcodecs.Zstd(level=1),
            "zarr_format": 2,
        },
    ),
    "fixedscaleoffset": (
        "<f4",
        {
            "filters": [
                zarr.codecs.numcodecs.FixedScaleOffset(
                    offset=0, scale=100, dtype="<f4", astype="<i4"
                )
            ],
            "compressors": ZSTD,
        },
    ),
    "transpose": (
        "<f4",
        {"filters": [zc.TransposeCodec(order=(1, 0))], "compressors": ZSTD},
    ),
    "big-endian": (
        "<f4",
        {"serializer": zc.BytesCodec(endian="big"), "compressors": ZSTD},
    ),
    "plain": ("<f4", {"compressors": ZSTD}),
}


def write(path: Path, chain: str, size_mb: int) -> np.ndarray:
    dtype, kwargs = CHAINS[chain]
    kwargs = dict(kwargs)
    rows = size_mb * 2**20 // (COLUMNS * 4)
    data = (np.arange(rows * COLUMNS) % 9973).astype(dtype).reshape(rows, COLUMNS)
    if dtype == "<f4":
        data /= 100
    chunk_rows = kwargs.pop("chunk_rows", 256)
    shard_rows = kwargs.pop("shard_rows", None)
    chunks = (min(chunk_rows, rows), COLUMNS)
    shards = None if shard_rows is None else (min(shard_rows, rows), COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs codecs outside the v3 specification
        z = zarr.create_array(
            path, shape=data.shape, chunks=chunks, shards=shards, dtype=dtype, **kwargs
        )
        z[...] = data
    return data


def in_memory(path: Path) -> zarr.storage.MemoryStore:
    """The array at ``path`` copied into a MemoryStore."""
    return zarr.storage.MemoryStore(
        {
            f.relative_to(path).as_posix(): cpu.Buffer.from_bytes(f.read_bytes())
            for f in path.rglob("*")
            if f.is_file()
        }
    )


def timed(read, repeats: int) -> float:
    read()  # warm-up: engines, kernels, open arrays
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--small", action="store_true", help="4 MiB arrays: a check that it runs"
    )
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--store", choices=["local", "memory"], default="local")
    args = parser.parse_args()
    size_mb = 4 if args.small else args.size_mb
    gpu = zarrs_nvcomp.gpu_unavailable_reason() is None
    cp = cupy_module() if gpu else None
    device = "cuda" if gpu else "cpu"
    root = args.dir or Path(tempfile.mkdtemp(prefix="pipeline_read_"))
    print(
        f"{size_mb} MiB arrays on the {'GPU' if gpu else 'CPU'}, the pipeline from a "
        f"{args.store} store; median of {args.repeats}"
    )
    print(f"{'chain':<18}{'pipeline GB/s':>15}{'reader GB/s':>13}{'ratio':>8}")
    for chain in CHAINS:
        path = root / f"{chain}.zarr"
        data = write(path, chain, size_mb)
        source = path if args.store == "local" else in_memory(path)

        def by_pipeline(source=source):
            with (
                zarr.config.set(PIPELINE),
                zarr.config.enable_gpu() if gpu else zarr.config.set({}),
            ):
                got = zarr.open_array(source, mode="r")[...]
            if cp is not None:
                cp.cuda.Device().synchronize()
            return got

        def by_reader(path=path):
            return zarrs_nvcomp.read_chunks_parallel(str(path), device=device)

        try:
            got = by_pipeline()
        except (ValueError, TypeError) as e:  # zarr's own pipeline, on GPU buffers
            print(f"{chain:<18}{type(e).__name__}: {str(e).splitlines()[0][:60]}")
            continue
        np.testing.assert_array_equal(cp.asnumpy(got) if cp is not None else got, data)
        pipeline_s, reader_s = (
            timed(by_pipeline, args.repeats),
            timed(by_reader, args.repeats),
        )
        gbs = data.nbytes / 1e9
        print(
            f"{chain:<18}{gbs / pipeline_s:>15.2f}{gbs / reader_s:>13.2f}{reader_s / pipeline_s:>8.2f}"
        )


if __name__ == "__main__":
    main()
