"""Long fuzz campaign of the Python entry points (issue 29: never panic).

Runs the cases of ``python/tests/fuzz_cases.py`` (arbitrary metadata, storage
and read/write options, selections, codec configurations and bytes) in child
processes, each case under a watchdog (``CASE_TIMEOUT``) and an address-space
cap of its declared output plus ``OVERHEAD`` (``RLIMIT_AS``). A child that
dies or hangs costs only its case: the parent records it with the case's
reproducer and starts another child at the next case.

    python fuzz/entry_points.py --cases 100000 [--jobs 2] [--per-child 2000]
                                [--seed 1] [--out DIR]

Prints the cases run, the outcomes by kind (``ok`` or the package error's
class), and every violation (non-package error, inconsistent result, crash,
hang) with its case's ``repr``; writes them to ``DIR/violations.jsonl``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "python" / "tests"


def child(seed: int, count: int) -> None:
    """Runs ``count`` cases drawn with ``seed``, one JSON line before and after each."""
    sys.path.insert(0, str(TESTS))
    import fuzz_cases
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    strategy = fuzz_cases.all_cases()

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(case):
        start = {
            "start": repr(case),
            "kind": case["kind"],
        }
        print(json.dumps(start), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                result = {"outcome": fuzz_cases.run(case, Path(tmp))}
            except fuzz_cases.Violation as e:
                result = {"violation": str(e)[:2000]}
            except Exception as e:  # noqa: BLE001 - the harness's own error, reported, not fatal
                result = {"violation": f"harness: {type(e).__name__}: {e}"[:2000]}
        print(json.dumps(result), flush=True)

    one()


def run_child(seed: int, count: int, log: Path) -> list[dict]:
    """Runs one child to its end, restarting after a crash; the records of its
    cases, each also appended to ``log`` as it comes."""
    records: list[dict] = []
    part = 0
    while len(records) < count and part < count:
        err = log.with_suffix(f".{seed}.{part}.err")
        with open(err, "w") as stderr:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(seed * 1000 + part),
                    str(count - len(records)),
                ],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
            current = None
            for line in proc.stdout:
                msg = json.loads(line)
                if "start" in msg:
                    current = msg
                    continue
                records.append(
                    {
                        **msg,
                        "kind": current["kind"],
                        "case": current["start"],
                    }
                )
                _append(log, records[-1])
                current = None
            rc = proc.wait()
        text = err.read_text()
        if current is not None or rc != 0:
            kind = "hang" if "Timeout (" in text else "crash"
            records.append(
                {
                    "violation": f"{kind}: exit status {rc}: {text[-1500:]}",
                    "kind": current["kind"] if current else None,
                    "case": current["start"] if current else None,
                }
            )
            _append(log, records[-1])
        else:
            err.unlink()
        part += 1
    return records


def _append(log: Path, record: dict) -> None:
    """Appends ``record`` to the campaign's log of records, so that a campaign
    stopped early leaves what it ran."""
    with open(log.parent / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--per-child", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=os.environ.get("OUT", "fuzz-out"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    batches = []
    left = args.cases
    while left > 0:
        batches.append((args.seed * 100_000 + len(batches), min(left, args.per_child)))
        left -= args.per_child
    t0 = time.time()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = pool.map(
            lambda b: run_child(b[0], b[1], out / "child"),
            batches,
        )
        records = [r for rs in results for r in rs]
    outcomes = collections.Counter(
        f"{r['kind']}: {r.get('outcome', 'VIOLATION')}" for r in records
    )
    violations = [r for r in records if "violation" in r]
    print(f"{len(records)} cases in {time.time() - t0:.0f} s (seed {args.seed})")
    for name, n in sorted(outcomes.items()):
        print(f"  {name}: {n}")
    print(f"{len(violations)} violations")
    by_kind = collections.Counter(
        r["violation"].split(":")[0][:120] for r in violations
    )
    for first, n in by_kind.most_common():
        print(f"  {n} x {first}")
    with open(out / "violations.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in violations)
    with open(out / "summary.json", "w") as f:
        json.dump(
            {
                "cases": len(records),
                "outcomes": outcomes,
                "violations": len(violations),
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
