#!/usr/bin/env bash
# The GPU checks of a change in one device run (through .gpu/on-device):
#   bash .gpu/on-device bash scripts/gpu_check.sh STEP...
# Steps: rust (the Rust GPU test binaries in .gpu/bin, or packed in
# .gpu/rust-bins.tar.xz, beside the release zarrs-nvcomp-gpu-worker binary,
# which the untrusted decodes of the tests start), tests (pytest -m gpu),
# read, boundary, choice, write, write-new, write-tmpfs, xarray, untrusted, sharded, blosc, dask, fuzz.
# Each step has its own time limit; the full log goes to $OUT/gpu_check.log
# (one file: few come back from a run), each step's tail to stdout.
# Every step runs; the script exits non-zero if any failed or is unknown.
set -u
failed=()
run() { # run NAME SECONDS CMD...: the command's log appended to the full log, its tail here
  local name=$1 limit=$2 log
  shift 2
  log=$(mktemp)
  echo "== $name"
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  echo "(exit $rc)"
  ((rc == 0)) || failed+=("$name")
  tail -n "${TAIL:-25}" "$log"
  { echo "===== $name: $*"; cat "$log"; } >>"$OUT/gpu_check.log"
  rm -f "$log"
}
for step in "$@"; do
  case $step in
    rust)
      # Test binaries travel compressed (.gpu/rust-bins.tar.xz) where the
      # carry limit would not take them whole.
      [[ -f .gpu/rust-bins.tar.xz ]] && tar -xJf .gpu/rust-bins.tar.xz -C .gpu/bin
      [[ -x .gpu/bin/zarrs-nvcomp-gpu-worker ]] || { echo "no .gpu/bin/zarrs-nvcomp-gpu-worker"; failed+=("rust (no worker)"); }
      # tests/gpu is one binary (gpu-<hash>): one run per module, each with its own limit.
      for t in .gpu/bin/gpu-*; do
        for module in $("$t" --list --include-ignored 2>/dev/null | sed -n 's/^\([a-z_]*\)::.*: test$/\1/p' | sort -u); do
          run "$module" 180 "$t" "$module::" --include-ignored --test-threads 1
        done
      done ;;
    read) run read_bench 300 python3 benches/read_bench.py --size-mb 1024 --repeats 3 ;;
    tests) TAIL=40 run pytest_gpu 420 python3 -m pytest -q -m gpu -p no:cacheprovider python/tests -rfEx ;;
    boundary) run python_boundary 240 python3 benches/python_boundary.py --size-mb 1024 --repeats 3 ;;
    choice) TAIL=60 run device_choice 300 python3 benches/device_choice.py --max-mb 1024 --budget 0.1 ;;
    # boto3 and moto are not carried: the S3 part runs on the development machine.
    write) TAIL=40 run write_bench 300 python3 benches/write_bench.py --size-mb 1024 --repeats 2 --no-s3 ;;
    write-new) TAIL=40 run write_bench_new 400 python3 benches/write_bench.py --size-mb 1024 --repeats 2 --no-s3 --new-arrays ;;
    write-tmpfs) TAIL=40 run write_bench_tmpfs 300 python3 benches/write_bench.py --size-mb 1024 --repeats 3 --no-s3 --dir /dev/shm ;;
    xarray) run xarray_bench 240 python3 benches/xarray_bench.py --size-mb 1024 --repeats 3 ;;
    untrusted) run untrusted_read_bench 240 python3 benches/untrusted_read_bench.py --size-mb 1024 --repeats 3 ;;
    sharded) TAIL=30 run read_sharded_bench 300 python3 benches/read_sharded_bench.py ;;
    blosc) TAIL=30 run read_blosc_bench 300 python3 benches/read_blosc_bench.py ;;
    dask) TAIL=30 run dask_multi_gpu 540 python3 benches/dask_multi_gpu.py ;;
    fuzz) run fuzz 280 python3 fuzz/gpu_fuzz.py --cases "${FUZZ_CASES:-20}" --chain-cases "${CHAIN_CASES:-5}" --jobs 14 --out "$OUT" ;;
    *) echo "unknown step $step"; failed+=("$step (unknown)") ;;
  esac
done
if ((${#failed[@]})); then
  echo "failed: ${failed[*]}"
  exit 1
fi
