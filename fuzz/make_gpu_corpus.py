"""Turns the codec cases of a ``gpu_fuzz.py`` run (``failures.jsonl``) into
corpus files for the GPU tests (``python/tests/test_gpu_safety.py``): one JSON
file per case with the algorithm, the batch that failed once and the valid
batch it was made from.

    python fuzz/make_gpu_corpus.py FAILURES.jsonl [--max N] [--only-killed]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "gpu_corpus"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("failures")
    parser.add_argument("--max", type=int, default=40)
    parser.add_argument(
        "--only-killed",
        action="store_true",
        help="only cases whose GPU decoder was killed",
    )
    args = parser.parse_args()
    CORPUS.mkdir(exist_ok=True)
    written = 0
    for line in Path(args.failures).read_text().splitlines():
        record = json.loads(line)
        if "batch" not in record or written >= args.max:
            continue
        if args.only_killed and not record.get("worker_killed"):
            continue
        case = {k: record[k] for k in ("algorithm", "mutator", "batch", "valid")}
        case["found"] = {
            k: record.get(k)
            for k in ("gpu_msg", "cpu_msg", "worker_killed", "gpu_ok_cpu_err")
        }
        gpu_cpu = (record.get("gpu"), record.get("cpu"))
        if record.get("differ") or gpu_cpu in (("ok", "err"), ("err", "ok")):
            case["known_gap"] = (
                f"nvCOMP's {record['algorithm']} decoder and the CPU's disagree on this invalid "
                f"stream (GPU {gpu_cpu[0]}, CPU {gpu_cpu[1]}); not closed"
            )
        digest = hashlib.sha256(json.dumps(case["batch"]).encode()).hexdigest()[:12]
        name = f"{record['algorithm']}-{record['mutator']}-{digest}.json"
        (CORPUS / name).write_text(json.dumps(case, indent=0))
        written += 1
    print(f"wrote {written} cases to {CORPUS}")


if __name__ == "__main__":
    main()
