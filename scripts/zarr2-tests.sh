#!/usr/bin/env bash
# Runs python/tests_zarr2 (zarr 2.18, numcodecs < 0.16) in the virtual
# environment $1 (made by scripts/setup.sh): builds the wheel (or reuses the
# one in $ZARR2_WHEEL_DIR when set), installs it there without dependencies,
# and runs pytest.
#
#   bash scripts/zarr2-tests.sh .venv-zarr2
set -euo pipefail
venv=${1:-.venv-zarr2}
[[ $venv = /* ]] || venv=$PWD/$venv
cd "$(dirname "$0")/.."
root=$PWD
[[ -x $venv/bin/python ]] || { echo "zarr2-tests: no virtual environment at $venv (run scripts/setup.sh)" >&2; exit 2; }

wheels=${ZARR2_WHEEL_DIR:-}
if [[ -z $wheels ]]; then
  wheels=$(mktemp -d)
  trap 'rm -rf "$wheels"' EXIT
  maturin=(python3 -m maturin)
  [[ -x $root/.venv/bin/maturin ]] && maturin=("$root/.venv/bin/maturin")
  (cd python && "${maturin[@]}" build --release --quiet --out "$wheels") >&2
fi
wheel=$(ls -t "$wheels"/zarrs_nvcomp-*.whl | head -n1)
"$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$wheel"
# From a directory outside the source tree, so the installed package is imported.
cd "$(mktemp -d)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests_zarr2"
