"""GPU fuzz harness: mutated chunks against the GPU decoders, on the H200.

For each algorithm of ``nvcomp_batch`` and each batched standard zarr chain,
valid chunks are mutated (bit flips, XOR runs, truncation, zeroed ranges,
random bytes, edited header fields, splices of two chunks) and decoded on the
GPU (the default, untrusted mode) and on the CPU. Every case runs in a child
process with a time limit; the table counts, per group:

- ``hang``: the case did not finish within the limit (the child is killed);
- ``crash``: the child died during the case (signal or exit);
- ``poisoned``: after the case, a valid batch no longer decodes in the child
  (its CUDA context was left unusable);
- ``gpu_ok_cpu_err``: the GPU returned data where the CPU raised;
- ``differ``: both returned data, but not the same bytes;
- ``gpu_err_cpu_ok``: the GPU raised where the CPU returned data (its host
  checks refuse streams RFC 8878 calls corrupt that a CPU library decodes
  anyway, such as Zstandard Huffman streams not consumed exactly);
- ``bad_index``: the GPU's error named a buffer other than the mutated one;
- ``ipc_error``: the worker could not map the engine's memory
  (``cuIpcOpenMemHandle`` failed, as with ``CUDA_ERROR_ALREADY_MAPPED``): a
  defect of the engine, not a verdict on the data, which would otherwise
  count as ``gpu_err_cpu_ok`` or ``bad_index``.

The first three, ``gpu_ok_cpu_err`` and ``ipc_error`` must be zero. Each child runs one
group's cases in order and reports each; after a hang or crash the parent
starts a new child at the next case, so every case still gets a fresh chance
and a failure costs only its own case.

    python fuzz/gpu_fuzz.py [--cases N] [--jobs J] [--out DIR]

Cases that failed (any counter above, or a GPU worker that had to be killed)
are written to ``DIR/failures.jsonl`` with their bytes (base64), for the
committed corpus (``fuzz/gpu_corpus``), which the GPU tests replay.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

CODEC_ALGORITHMS = [
    "lz4",
    "snappy",
    "zstd",
    "deflate",
    "gzip",
    "gdeflate",
    "cascaded",
    "bitcomp",
    "ans",
]
CHAINS = [
    "v3-zstd-1",
    "v3-zstd-3",
    "v3-zstd-9",
    "v3-zstd-crc32c",
    "v3-gzip",
    "v2-lz4",
    "v2-zlib",
]
MUTATORS = [
    "bitflip",
    "xor_run",
    "truncate",
    "zero_range",
    "random_bytes",
    "header",
    "splice",
]
CASE_LIMIT = 30.0  # seconds per case, worker start and its own time limit included


def field(n: int, seed: int) -> bytes:
    import numpy as np

    rng = np.random.default_rng(seed)
    return np.cumsum(rng.standard_normal(n // 4)).round(2).astype(np.float32).tobytes()


def mutate(data: bytes, other: bytes, mutator: str, rng: random.Random) -> bytes:
    b = bytearray(data)
    n = len(b)
    if n == 0:
        return bytes(rng.randbytes(8))
    if mutator == "bitflip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
    elif mutator == "xor_run":
        start = rng.randrange(n)
        step = rng.choice([1, 3, 7, 13])
        for i in range(start, n, step):
            b[i] ^= rng.choice([0x5A, 0xFF, 0x01])
    elif mutator == "truncate":
        return bytes(b[: rng.randrange(n)])
    elif mutator == "zero_range":
        start = rng.randrange(n)
        end = min(n, start + rng.randint(1, max(1, n // 4)))
        b[start:end] = bytes(end - start)
    elif mutator == "random_bytes":
        start = rng.randrange(n)
        end = min(n, start + rng.randint(1, 64))
        b[start:end] = rng.randbytes(end - start)
    elif mutator == "header":
        # The framing lives in the first bytes (sizes, page tables, frame headers).
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(min(n, 32))
            b[i] = rng.choice([0, 0xFF, rng.randrange(256), b[i] ^ 0x80])
    elif mutator == "splice":
        cut = rng.randrange(n)
        cut2 = rng.randrange(len(other)) if other else 0
        return bytes(b[:cut]) + other[cut2:]
    return bytes(b)


# --- child side -------------------------------------------------------------


def outcome(fn) -> tuple[str, object]:
    try:
        return "ok", fn()
    except Exception as e:
        return "err", f"{type(e).__name__}: {e}"


def child_codec(
    algorithm: str, mutator: str, seed: int, start: int, count: int
) -> None:
    import zarrs_nvcomp

    gpu = zarrs_nvcomp.NvCompBatchCodec(algorithm, device="cuda")
    trusted = zarrs_nvcomp.NvCompBatchCodec(
        algorithm, device="cuda", trusted_input=True
    )
    cpu_ok = algorithm in zarrs_nvcomp.CPU_ALGORITHMS
    cpu = zarrs_nvcomp.NvCompBatchCodec(algorithm, device="cpu") if cpu_ok else None
    sizes = [1000, 20_000, 65536]
    valid_plain = [field(s, seed + i) for i, s in enumerate(sizes)]
    valid = [bytes(memoryview(e)) for e in (cpu or gpu).encode_batch(valid_plain)]
    for case in range(start, start + count):
        rng = random.Random(f"{algorithm}/{mutator}/{seed}/{case}")
        k = rng.randrange(len(valid))
        bad = mutate(valid[k], valid[(k + 1) % len(valid)], mutator, rng)
        batch = [valid[0], bad, valid[2]]
        print(json.dumps({"start": case}), flush=True)
        g_kind, g_val = outcome(
            lambda b=batch: [bytes(memoryview(x)) for x in gpu.decode_batch(b)]
        )
        record = {
            "case": case,
            "gpu": g_kind,
            "gpu_msg": g_val if g_kind == "err" else "",
        }
        if g_kind == "err":
            record["bad_index"] = (
                "buffer 1" not in g_val and "GPU decoding worker" not in g_val
            )
        if cpu is not None:
            c_kind, c_val = outcome(
                lambda b=batch: [bytes(memoryview(x)) for x in cpu.decode_batch(b)]
            )
            record["cpu"] = c_kind
            record["cpu_msg"] = c_val if c_kind == "err" else ""
            if g_kind == "ok" and c_kind == "ok":
                record["differ"] = g_val != c_val
        sanity = outcome(lambda: trusted.decode_batch(valid))
        record["poisoned"] = sanity[0] != "ok"
        record["worker_killed"] = (
            "did not finish" in record["gpu_msg"] or "died" in record["gpu_msg"]
        )
        if any(record.get(x) for x in ("poisoned", "differ", "worker_killed")) or (
            record["gpu"] == "ok" and record.get("cpu") == "err"
        ):
            record["algorithm"] = algorithm
            record["batch"] = [base64.b64encode(x).decode() for x in batch]
            record["valid"] = [base64.b64encode(x).decode() for x in valid]
        print(json.dumps(record), flush=True)


def write_chain(path: str, chain: str):
    import numpy as np
    import zarr

    data = np.frombuffer(field(4 * 256 * 256, 11), np.float32).reshape(256, 256)
    if chain.startswith("v3"):
        from zarr.codecs import Crc32cCodec, GzipCodec, ZstdCodec

        compressors = {
            "v3-zstd-1": [ZstdCodec(level=1)],
            "v3-zstd-3": [ZstdCodec(level=3)],
            "v3-zstd-9": [ZstdCodec(level=9, checksum=True)],
            "v3-zstd-crc32c": [ZstdCodec(level=3), Crc32cCodec()],
            "v3-gzip": [GzipCodec(level=5)],
        }[chain]
        arr = zarr.create_array(
            path,
            shape=data.shape,
            chunks=(128, 128),
            dtype="f4",
            compressors=compressors,
        )
        key = os.path.join(path, "c", "0", "1")
    else:
        import numcodecs

        compressor = {"v2-lz4": numcodecs.LZ4(), "v2-zlib": numcodecs.Zlib(level=5)}[
            chain
        ]
        arr = zarr.create_array(
            path,
            shape=data.shape,
            chunks=(128, 128),
            dtype="f4",
            zarr_format=2,
            compressors=compressor,
        )
        key = os.path.join(path, "0.1")
    arr[:] = data
    return key


def child_chain(chain: str, mutator: str, seed: int, start: int, count: int) -> None:
    import numpy as np

    import zarrs_nvcomp

    path = os.path.join(tempfile.mkdtemp(), "a.zarr")
    key = write_chain(path, chain)
    with open(key, "rb") as f:
        good = f.read()
    with open(
        os.path.join(os.path.dirname(key), "1" if chain.startswith("v3") else "1.0"),
        "rb",
    ) as f:
        other = f.read()
    for case in range(start, start + count):
        rng = random.Random(f"{chain}/{mutator}/{seed}/{case}")
        bad = mutate(good, other, mutator, rng)
        with open(key, "wb") as f:
            f.write(bad)
        print(json.dumps({"start": case}), flush=True)
        g_kind, g_val = outcome(
            lambda: zarrs_nvcomp.read_chunks_parallel(path, device="cuda").get()
        )
        c_kind, c_val = outcome(
            lambda: zarrs_nvcomp.read_chunks_parallel(path, device="cpu")
        )
        record = {
            "case": case,
            "gpu": g_kind,
            "gpu_msg": g_val if g_kind == "err" else "",
            "cpu": c_kind,
            "cpu_msg": c_val if c_kind == "err" else "",
        }
        if g_kind == "ok" and c_kind == "ok":
            record["differ"] = not np.array_equal(g_val, c_val, equal_nan=True)
        if g_kind == "err":
            record["bad_index"] = "c/0/1" not in g_val and "0.1" not in g_val
        with open(key, "wb") as f:
            f.write(good)
        sanity = outcome(
            lambda: zarrs_nvcomp.read_chunks_parallel(
                path, device="cuda", trusted_input=True
            )
        )
        record["poisoned"] = sanity[0] != "ok"
        record["worker_killed"] = (
            "did not finish" in record["gpu_msg"] or "died" in record["gpu_msg"]
        )
        if any(record.get(x) for x in ("poisoned", "differ", "worker_killed")) or (
            g_kind == "ok" and c_kind == "err"
        ):
            record["bytes"] = base64.b64encode(bad).decode()
        print(json.dumps(record), flush=True)


# --- parent side ------------------------------------------------------------


def forward(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_group(kind: str, name: str, mutator: str, seed: int, cases: int) -> list[dict]:
    """Runs one group's cases in children, restarting after hangs and crashes."""
    records: list[dict] = []
    next_case = 0
    env = dict(os.environ, ZARRS_NVCOMP_GPU_TIMEOUT="10")
    while next_case < cases:
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                kind,
                name,
                mutator,
                str(seed),
                str(next_case),
                str(cases - next_case),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        lines: queue.Queue = queue.Queue()
        threading.Thread(
            target=forward, args=(child.stdout, lines), daemon=True
        ).start()
        current = None
        while True:
            try:
                line = lines.get(timeout=CASE_LIMIT if current is not None else 120)
            except queue.Empty:
                child.kill()
                child.wait()
                case = current if current is not None else next_case
                records.append({"case": case, "hang": True})
                next_case = case + 1
                break
            if line is None:
                child.wait()
                if current is not None:
                    records.append(
                        {"case": current, "crash": True, "rc": child.returncode}
                    )
                    next_case = current + 1
                else:
                    next_case = cases if child.returncode == 0 else next_case + 1
                    if child.returncode != 0:
                        records.append(
                            {
                                "case": next_case - 1,
                                "crash": True,
                                "rc": child.returncode,
                            }
                        )
                break
            msg = json.loads(line)
            if "start" in msg:
                current = msg["start"]
            else:
                records.append(msg)
                current = None
                next_case = msg["case"] + 1
    for r in records:
        r.update(kind=kind, name=name, mutator=mutator)
    return records


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, name, mutator, seed, start, count = sys.argv[2:8]
        fn = child_codec if kind == "codec" else child_chain
        fn(name, mutator, int(seed), int(start), int(count))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--cases", type=int, default=60, help="cases per algorithm and mutator"
    )
    parser.add_argument(
        "--chain-cases", type=int, default=15, help="cases per chain and mutator"
    )
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument(
        "--only", default="", help="comma-separated algorithms or chains"
    )
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    groups = [("codec", a, m, args.cases) for a in CODEC_ALGORITHMS for m in MUTATORS]
    groups += [("chain", c, m, args.chain_cases) for c in CHAINS for m in MUTATORS]
    groups = [g for g in groups if not only or g[1] in only]
    t0 = time.time()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(
            pool.map(lambda g: run_group(g[0], g[1], g[2], args.seed, g[3]), groups)
        )
    records = [r for rs in results for r in rs]
    counters = [
        "hang",
        "crash",
        "poisoned",
        "gpu_ok_cpu_err",
        "gpu_err_cpu_ok",
        "differ",
        "bad_index",
        "worker_killed",
        "ipc_error",
    ]
    table: dict[str, dict[str, int]] = {}
    failures = []
    for r in records:
        row = table.setdefault(r["name"], dict.fromkeys(["cases", *counters], 0))
        row["cases"] += 1
        r["gpu_ok_cpu_err"] = r.get("gpu") == "ok" and r.get("cpu") == "err"
        r["gpu_err_cpu_ok"] = r.get("gpu") == "err" and r.get("cpu") == "ok"
        r["ipc_error"] = "cuIpcOpenMemHandle" in r.get("gpu_msg", "")
        for c in counters:
            row[c] += bool(r.get(c))
        # A few of each kind are kept (with their bytes) for the corpus.
        kinds = tuple(c for c in counters if r.get(c))
        kept = sum(
            1 for f in failures if f["name"] == r["name"] and f["kinds"] == kinds
        )
        if kinds and kept < 5:
            failures.append({**r, "kinds": kinds})
    print(f"{len(records)} cases in {time.time() - t0:.0f} s")
    print("| group | cases | " + " | ".join(counters) + " |")
    print("|---" * (len(counters) + 2) + "|")
    for name, row in table.items():
        print(
            f"| {name} | "
            + " | ".join(str(row[c]) for c in ["cases", *counters])
            + " |"
        )
    total = {c: sum(row[c] for row in table.values()) for c in ["cases", *counters]}
    print("| total | " + " | ".join(str(total[c]) for c in ["cases", *counters]) + " |")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "failures.jsonl"), "w") as f:
        for r in failures:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(args.out, "fuzz_table.json"), "w") as f:
        json.dump({"table": table, "total": total}, f, indent=1)


if __name__ == "__main__":
    main()
