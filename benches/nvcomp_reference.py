"""Decode the streams dumped by `benches/gpu_decode.rs` with nvCOMP's own
Python API (`nvidia.nvcomp`), and print its throughput next to ours.

    BENCH_DUMP=/tmp/dump gpu_decode && python3 benches/nvcomp_reference.py /tmp/dump

Both run on the same machine in the same job, on the same raw streams
(our LZ4 buffers minus their 4-byte header, our GDeflate buffers split
into their pages), device-resident, best of 3 after a warm-up.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
from nvcomp_batch import NVCOMP_NAMES, as_batch


def best(reps, fn):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(dump: Path) -> None:
    try:
        import cupy as cp
        from nvidia import nvcomp
    except ImportError as e:
        print(f"skipped: {e}")
        return
    ours = json.loads((dump / "ours.json").read_text())
    print(
        f"nvidia.nvcomp {nvcomp.__version__} vs zarrs_nvcomp, device-resident decode (GB/s)"
    )
    print(
        f"{'case':<16} {'nvcomp':>8} {'ours':>8} {'ours_into':>10} {'ratio':>6} {'ratio_into':>10}"
    )
    for case in sorted(p.stem for p in dump.glob("*.idx")):
        name = case.split("_")[0]
        idx = np.fromfile(dump / f"{case}.idx", dtype="<u8")
        n = len(idx) // 2
        sizes, decoded = idx[:n].astype(np.int64), idx[n:].astype(np.int64)
        packed = np.fromfile(dump / f"{case}.bin", dtype=np.uint8)
        packed_at = np.concatenate([[0], np.cumsum(sizes)])
        # nvCOMP's Python API wants every stream 16-byte aligned.
        aligned_at = np.concatenate([[0], np.cumsum((sizes + 15) // 16 * 16)])
        host = np.zeros(int(aligned_at[-1]), dtype=np.uint8)
        for i in range(n):
            host[aligned_at[i] : aligned_at[i] + sizes[i]] = packed[
                packed_at[i] : packed_at[i + 1]
            ]
        blob = cp.asarray(host)
        batch = as_batch(
            nvcomp, [blob[aligned_at[i] : aligned_at[i] + sizes[i]] for i in range(n)]
        )
        codec = nvcomp.Codec(
            algorithm=NVCOMP_NAMES[name], bitstream_kind=nvcomp.BitstreamKind.RAW
        )

        def run(codec=codec, batch=batch):
            out = codec.decode(batch)
            cp.cuda.runtime.deviceSynchronize()
            return out

        check = run()
        total = int(decoded.sum())
        got = sum(int(cp.asarray(a).nbytes) for a in check)
        if got != total:
            print(f"{case}: nvcomp decoded {got} bytes, expected {total}")
            continue
        gbs = total / best(3, run) / 1e9
        mine = ours[case]
        print(
            f"{case:<16} {gbs:>8.1f} {mine['decode']:>8.1f} {mine['decode_into']:>10.1f} "
            f"{mine['decode'] / gbs:>6.2f} {mine['decode_into'] / gbs:>10.2f}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
