#!/usr/bin/env bash
# Installs the release wheel of $1 as a user would, unlocked, with the newest
# releases its bounds admit: first with each extra alone into a fresh venv,
# checking it imports what it promises (scripts/check-extra.py); then with
# the README's extras into the clean virtual environment $2, running the seed
# examples from it with an empty environment and no Rust on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
wheel_dir=$(cd "$1" && pwd)
venv=$2
[[ $venv = /* ]] || venv=$root/$venv

wheels=("$wheel_dir"/zarrs_nvcomp-*.whl)
((${#wheels[@]} == 1)) || { echo "expected one wheel in $wheel_dir, found: ${wheels[*]}" >&2; exit 1; }
wheel=${wheels[0]}
echo "wheel: $(basename "$wheel")"
# One wheel for every CPython >= 3.11 (abi3), on a manylinux glibc baseline
# (the lowest the build machine's glibc allows: 2_34 on Debian 12).
[[ $(basename "$wheel") == *-cp311-abi3-manylinux_2_*_x86_64.whl ]] || {
  echo "not an abi3 manylinux wheel: $wheel" >&2
  exit 1
}

# env -i: no VIRTUAL_ENV, PYTHONPATH, CARGO_TARGET_DIR, nor ~/.cargo/bin on PATH.
clean=(env -i HOME="$HOME" PATH=/usr/bin:/bin)
if "${clean[@]}" bash -c 'command -v cargo rustc' >/dev/null; then
  echo "cargo or rustc is on the clean PATH; the check would not show the wheel runs without Rust" >&2
  exit 1
fi
scratch=$venv-extra
trap 'rm -rf "$scratch"' EXIT
# fresh_venv DIR PACKAGE...: DIR made anew with PACKAGE... installed (and
# packaging, which check-extra.py reads requirements with).
fresh_venv() {
  local dir=$1
  shift
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/python" -m pip install -q "$@" packaging
}
# From a directory outside the source tree, so the package comes from the wheel.
outside=$(mktemp -d)
for extra in zarr xarray dask cu12 cu13 gpu; do
  fresh_venv "$scratch" "$wheel[$extra]"
  (cd "$outside" && "${clean[@]}" "$scratch/bin/python" "$root/scripts/check-extra.py" "$extra")
done
# The check itself fails on a broken pair: dask 2026.11.0 beside distributed
# 2021.4.1 (what `pip install dask distributed` resolved to until distributed
# caught up), which the [dask] extra's bounds no longer admit.
fresh_venv "$scratch" "$wheel" "dask[array]==2026.11.0" "distributed==2021.4.1"
if found=$(cd "$outside" && "${clean[@]}" "$scratch/bin/python" "$root/scripts/check-extra.py" dask 2>&1); then
  echo "check-extra.py passed dask 2026.11.0 with distributed 2021.4.1" >&2
  exit 1
fi
grep -q "distributed: ImportError" <<<"$found" || { echo "check-extra.py failed, but not on distributed's import: $found" >&2; exit 1; }
echo "the broken pair is caught, as it should be: $found"
rm -rf "$scratch"

rm -rf "$venv"
python3 -m venv "$venv"
py=$(cd "$venv/bin" && pwd)/python
# The extras the README's quick start installs (zarr, xarray, Dask), read
# from the wheel's metadata; nvCOMP's wheel, which the package must find
# without VIRTUAL_ENV or PYTHONPATH; pytest for the tests that run the
# documented examples.
"$py" -m pip install -q "$wheel[zarr,xarray,dask]" "nvidia-libnvcomp-cu13>=6,<7" pytest

cd "$outside"
"${clean[@]}" "$py" -c 'import sys, zarrs_nvcomp; print("imported", zarrs_nvcomp.__file__); sys.exit("site-packages" not in zarrs_nvcomp.__file__)'
"${clean[@]}" "$py" -m pytest -q -p no:cacheprovider "$root/python/tests/test_examples.py" "$root/python/tests/test_install.py"
"${clean[@]}" "$py" "$root/examples/demo.py" --size-mb 16 --repeats 1
