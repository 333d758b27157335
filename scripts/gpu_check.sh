#!/usr/bin/env bash
# The GPU checks of a change, in one device run (through .gpu/on-device):
#   bash .gpu/on-device bash scripts/gpu_check.sh [tests] [bench] [fuzz]
# Logs go to $OUT.
set -u
for step in "$@"; do
  case $step in
    tests)
      echo "== pytest -m gpu"
      timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider python/tests -rfEsx 2>&1 | tee "$OUT/pytest_gpu.log" | tail -40 ;;
    bench)
      echo "== untrusted vs trusted reads, 1 GiB"
      timeout 240 python3 benches/untrusted_read_bench.py --size-mb 1024 --repeats 3 2>&1 | tail -8 ;;
    fuzz)
      echo "== fuzz"
      timeout 280 python3 fuzz/gpu_fuzz.py --cases "${FUZZ_CASES:-20}" --chain-cases "${CHAIN_CASES:-5}" --jobs 14 --out "$OUT" 2>&1 | tail -25 ;;
  esac
done
