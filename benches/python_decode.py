"""Batched decode throughput from Python: zarrs_nvcomp next to nvidia.nvcomp and numcodecs.

    python benches/python_decode.py                 # 1 GiB (the H200 run)
    python benches/python_decode.py --size-mb 64    # CPU-only smoke run

Data: field_f32, a float32 2-D random walk rounded to 0.01 (seeded), cut into
1 MiB and 64 KiB chunks, encoded with zarrs_nvcomp (LZ4, Zstd). Timed: one
decode_batch of all chunks, (a) NumPy in/out, (b) CuPy in/out (compressed
chunks already on the device), next to nvidia.nvcomp's batched decode of the
same device buffers and numcodecs on a thread pool. Best of --repeats after
one warm-up. Parts whose packages (or GPU) are missing are skipped with the
reason.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numcodecs
import numpy as np
import zarrs_nvcomp
from bench_data import best_of, field_f32
from nvcomp_batch import as_batch
from zarrs_nvcomp import NvCompBatchCodec

ALGORITHMS = {"lz4": ("LZ4", numcodecs.LZ4), "zstd": ("Zstd", numcodecs.Zstd)}
CHUNK_SIZES = {"1MiB": 1 << 20, "64KiB": 64 << 10}


def chunked(data: np.ndarray, chunk_bytes: int) -> list[np.ndarray]:
    flat = data.reshape(-1).view(np.uint8)
    return [flat[i : i + chunk_bytes] for i in range(0, flat.size, chunk_bytes)]


def try_import(name: str) -> tuple[Any, str | None]:
    try:
        module = __import__(name, fromlist=["_"])
    except Exception as e:  # noqa: BLE001  # ImportError, or a CUDA library that will not load
        return None, f"{name} unavailable: {type(e).__name__}: {e}"
    return module, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="data size in MiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16, help="numcodecs thread pool")
    parser.add_argument("--algorithms", default="lz4,zstd")
    args = parser.parse_args()

    gpu_reason = zarrs_nvcomp.gpu_unavailable_reason()
    cp, cp_reason = (
        try_import("cupy") if gpu_reason is None else (None, f"no GPU: {gpu_reason}")
    )
    nvc, nvc_reason = (
        try_import("nvidia.nvcomp") if cp is not None else (None, cp_reason)
    )
    if nvc is None:
        print(f"skipping GPU parts: {nvc_reason}")

    data = field_f32(args.size_mb << 20)
    total = data.nbytes
    print(
        f"field_f32: {total / 2**20:.0f} MiB, backend of zarrs_nvcomp: "
        f"{NvCompBatchCodec('lz4').backend}"
    )
    pool = ThreadPoolExecutor(args.threads)
    rows: list[tuple[str, str, str, float]] = []

    for algorithm in args.algorithms.split(","):
        nv_name, numcodec_cls = ALGORITHMS[algorithm]
        codec = NvCompBatchCodec(algorithm)
        for chunk_name, chunk_bytes in CHUNK_SIZES.items():
            chunks = chunked(data, chunk_bytes)
            encoded = codec.encode_batch(chunks)
            ratio = total / sum(len(e) for e in encoded)
            label = (
                f"{algorithm} {chunk_name} (ratio {ratio:.2f}, {len(chunks)} chunks)"
            )

            def gbps(seconds: float) -> float:
                return total / seconds / 1e9

            host_in = [np.frombuffer(e, dtype=np.uint8) for e in encoded]
            t = best_of(lambda c=codec, x=host_in: c.decode_batch(x), args.repeats)
            rows.append((label, "zarrs_nvcomp NumPy", codec.backend, gbps(t)))

            if cp is not None:
                dev_in = [cp.asarray(e) for e in host_in]
                sync = cp.cuda.runtime.deviceSynchronize
                t = best_of(
                    lambda c=codec, x=dev_in: c.decode_batch(x), args.repeats, sync
                )
                rows.append((label, "zarrs_nvcomp CuPy", codec.backend, gbps(t)))
                if nvc is not None:
                    # nvCOMP's own format is the bare stream: LZ4 without our 4-byte header.
                    # Copies, because nvCOMP's Python API wants 16-byte aligned streams.
                    skip = 4 if algorithm == "lz4" else 0
                    # Wrapping the arrays is timed too: both decoders start from CuPy arrays.
                    nv_in = [d[skip:].copy() for d in dev_in]
                    nv_codec = nvc.Codec(
                        algorithm=nv_name, bitstream_kind=nvc.BitstreamKind.RAW
                    )
                    t = best_of(
                        lambda c=nv_codec, x=nv_in: c.decode(as_batch(nvc, x)),
                        args.repeats,
                        sync,
                    )
                    rows.append((label, "nvidia.nvcomp", "cuda:0", gbps(t)))
                del dev_in

            theirs = numcodec_cls()
            t = best_of(
                lambda c=theirs, x=encoded: list(pool.map(c.decode, x)), args.repeats
            )
            rows.append((label, f"numcodecs x{args.threads} threads", "cpu", gbps(t)))

    print(f"\n{'data':<44} {'decoder':<26} {'on':<7} {'GB/s':>8}")
    for label, decoder, on, rate in rows:
        print(f"{label:<44} {decoder:<26} {on:<7} {rate:8.2f}")

    by = {(label, decoder): rate for label, decoder, _, rate in rows}
    print()
    for label in dict.fromkeys(r[0] for r in rows):
        ours, theirs = (
            by.get((label, "zarrs_nvcomp CuPy")),
            by.get((label, "nvidia.nvcomp")),
        )
        if ours and theirs:
            print(f"{label}: zarrs_nvcomp CuPy / nvidia.nvcomp = {ours / theirs:.2f}")
    for label in dict.fromkeys(r[0] for r in rows):
        if label.startswith("lz4 1MiB"):
            print(
                f"{label}: zarrs_nvcomp NumPy = {by[(label, 'zarrs_nvcomp NumPy')]:.2f} GB/s"
            )


if __name__ == "__main__":
    main()
