#!/usr/bin/env bash
# Installs the release wheel of $1 into a clean virtual environment $2 and runs
# the seed examples from it, with an empty environment and no Rust on PATH:
# what a user who runs `pip install zarrs-nvcomp` gets.
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

rm -rf "$venv"
python3 -m venv "$venv"
py=$(cd "$venv/bin" && pwd)/python
# The extras the README's quick start installs (zarr, xarray, Dask), read
# from the wheel's metadata; nvCOMP's wheel, which the package must find
# without VIRTUAL_ENV or PYTHONPATH; pytest for the tests that run the
# documented examples.
"$py" -m pip install -q "$wheel[zarr,xarray,dask]" "nvidia-libnvcomp-cu13>=6,<7" pytest

# env -i: no VIRTUAL_ENV, PYTHONPATH, CARGO_TARGET_DIR, nor ~/.cargo/bin on PATH.
clean=(env -i HOME="$HOME" PATH=/usr/bin:/bin)
if "${clean[@]}" bash -c 'command -v cargo rustc' >/dev/null; then
  echo "cargo or rustc is on the clean PATH; the check would not show the wheel runs without Rust" >&2
  exit 1
fi
# From a directory outside the source tree, so the package comes from the wheel.
cd "$(mktemp -d)"
"${clean[@]}" "$py" -c 'import sys, zarrs_nvcomp; print("imported", zarrs_nvcomp.__file__); sys.exit("site-packages" not in zarrs_nvcomp.__file__)'
"${clean[@]}" "$py" -m pytest -q -p no:cacheprovider "$root/python/tests/test_examples.py" "$root/python/tests/test_install.py"
"${clean[@]}" "$py" "$root/examples/demo.py" --size-mb 16 --repeats 1
