#!/usr/bin/env bash
# Resolves the development environments' lock files (make lock): every
# package pinned, with the hashes of all its files on the index, one file per
# environment and supported Python version, for Linux x86_64 (the platform
# the wheel is built for). scripts/setup.sh installs from them.
#
#   bash scripts/lock.sh [UV]     UV: the uv to run (default: uv on PATH)
#
# Run `make test-latest` first: it tries the newest releases the bounds admit.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${1:-uv}
pythons=(3.11 3.12 3.13)
envs=(dev zarr2)
for env in "${envs[@]}"; do
  for version in "${pythons[@]}"; do
    # --upgrade: the newest releases the inputs admit, not the old pins.
    "$uv" pip compile --quiet --upgrade --generate-hashes \
      --python-version "$version" --python-platform x86_64-manylinux_2_28 \
      --custom-compile-command "make lock" \
      --output-file "python/locks/$env-py$version.txt" "python/requirements-$env.txt"
  done
done
