"""zarr 3 read throughput with the nvcomp_batch codec: codec_pipeline.batch_size 1 versus
all chunks in one batch.

    python benches/zarr_batch_size.py                # 1 GiB
    python benches/zarr_batch_size.py --size-mb 64   # smoke run

With --gpu (and CuPy, a usable GPU) zarr reads through its GPU buffers
(zarr.config.enable_gpu()).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import zarrs_nvcomp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--chunk-kib", type=int, default=1024, help="chunk size in KiB")
    parser.add_argument("--algorithm", default="lz4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpu", action="store_true", help="read into GPU buffers")
    args = parser.parse_args()
    try:
        import zarr
        from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec
    except ImportError as e:
        print(f"skipping: zarr 3 unavailable: {e}")
        return
    cp = None
    if args.gpu:
        reason = zarrs_nvcomp.gpu_unavailable_reason()
        try:
            import cupy as cp
        except ImportError as e:
            reason = reason or f"CuPy unavailable: {e}"
        if reason:
            print(f"skipping --gpu: {reason}; reading into host memory")
            cp = None

    cols = 4096
    rows = max(1, (args.size_mb << 20) // (4 * cols))
    chunk_rows = max(1, (args.chunk_kib << 10) // (4 * cols))
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    data = np.cumsum(rng.standard_normal((rows, cols), dtype=np.float32) * 0.1, axis=1)
    data = np.round(data, 2).astype(np.float32)
    print(f"generated the data in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    store = zarr.storage.MemoryStore()
    # Written on the CPU: zarr 3.4 encodes the chunks of create_array(data=...)
    # one call each, and nvCOMP compresses a lone LZ4 chunk on one thread
    # block. The bitstream is the same; reads below use the GPU when usable.
    codec = NvCompBatchZarrCodec(algorithm=args.algorithm, device="cpu")
    with zarrs_nvcomp.set_zarr_batch_size():
        zarr.create_array(
            store, data=data, chunks=(chunk_rows, cols), compressors=codec
        )
    nchunks = -(-rows // chunk_rows)
    print(
        f"{data.nbytes / 2**20:.0f} MiB float32, {nchunks} chunks of "
        f"{chunk_rows * cols * 4 >> 10} KiB, {args.algorithm}, written on the CPU in "
        f"{time.perf_counter() - t0:.1f} s, read on {NvCompBatchZarrCodec(algorithm=args.algorithm).backend}",
        flush=True,
    )

    def read(batch_size: int | None) -> float:
        best = float("inf")
        with zarrs_nvcomp.set_zarr_batch_size(batch_size):
            gpu = zarr.config.enable_gpu() if cp is not None else zarr.config.set({})
            with gpu:
                z = zarr.open_array(store, mode="r")
                for i in range(args.repeats + 1):
                    t0 = time.perf_counter()
                    out = z[:]
                    if cp is not None:
                        cp.cuda.runtime.deviceSynchronize()
                    if i:
                        best = min(best, time.perf_counter() - t0)
        got = cp.asnumpy(out) if cp is not None else out
        np.testing.assert_array_equal(got, data)
        return data.nbytes / best / 1e9

    one, every = read(1), read(None)
    print(f"batch_size 1:          {one:8.2f} GB/s")
    print(f"batch_size all chunks: {every:8.2f} GB/s  ({every / one:.2f}x)")


if __name__ == "__main__":
    main()
