#!/usr/bin/env bash
# Installs what the build and the tests need, where it is missing:
# Debian packages (a C compiler, python3-venv), a Rust toolchain,
# the Python virtual environment $1 (dev requirements) and the zarr 2
# environment $2 (zarr 2.18, numcodecs < 0.16).
set -euo pipefail
venv=${1:-.venv}
zarr2_venv=${2:-.venv-zarr2}

need_apt=()
# c-blosc's Snappy (through zarrs' blosc) is C++: a C++ compiler too.
{ command -v cc && command -v c++; } >/dev/null || need_apt+=(build-essential)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  sudo=; [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null; then
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy
fi
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt 2>/dev/null || true

[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r python/requirements-dev.txt

[[ -x $zarr2_venv/bin/python ]] || python3 -m venv "$zarr2_venv"
"$zarr2_venv/bin/python" -m pip install -q "zarr>=2.18,<3" "numcodecs>=0.12,<0.16" "numpy<2.3" pytest
