#!/usr/bin/env bash
# Installs what the build and the tests need, where it is missing:
# Debian packages (a C compiler, python3-venv, clang-16, strace), a Rust toolchain,
# the Python virtual environment $1 (dev requirements) and the zarr 2
# environment $2 (zarr 2.18, numcodecs < 0.16), each from its lock file in
# python/locks/ (every package pinned and hashed; `make lock` renews them).
set -euo pipefail
venv=${1:-.venv}
zarr2_venv=${2:-.venv-zarr2}

need_apt=()
# c-blosc's Snappy (through zarrs' blosc) is C++: a C++ compiler too.
{ command -v cc && command -v c++; } >/dev/null || need_apt+=(build-essential)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# The committed PTX is checked against its CUDA C sources with the clang
# that wrote it (scripts/regenerate-ptx.sh --check, in make lint).
command -v clang-16 >/dev/null || need_apt+=(clang-16)
# test_missing_chunks counts a read's stat calls with strace.
command -v strace >/dev/null || need_apt+=(strace)
if ((${#need_apt[@]})); then
  sudo=; [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null; then
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy
fi
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt 2>/dev/null || true

version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# install_locked VENV ENV: the environment ENV's lock for this Python into VENV.
install_locked() {
  local lock=python/locks/$2-py$version.txt
  if [[ ! -f $lock ]]; then
    echo "setup: no lock file for Python $version ($lock); locked: $(ls python/locks | tr '\n' ' ')" >&2
    echo "setup: use one of those Pythons as python3, or add $version to scripts/lock.sh and run make lock" >&2
    exit 1
  fi
  # A venv made from another lock is made anew: installing over it would
  # keep the packages the new lock dropped.
  local stamp=$1/.locked-from
  if [[ -x $1/bin/python ]] && cmp -s "$lock" "$stamp"; then
    return
  fi
  rm -rf "$1"
  # make puts the venv first on PATH: the python3 found before may have been
  # the one just removed.
  hash -r
  python3 -m venv "$1"
  # --no-deps: the lock is complete, so nothing is resolved here.
  "$1/bin/python" -m pip install -q --require-hashes --no-deps -r "$lock"
  cp "$lock" "$stamp"
}
install_locked "$venv" dev
install_locked "$zarr2_venv" zarr2
