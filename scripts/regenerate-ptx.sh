#!/usr/bin/env bash
# Rewrites the committed PTX of the CUDA C kernels in src/cuda/kernels/ with
# clang (Debian's clang-16, which scripts/setup.sh installs); no CUDA toolkit
# is needed. With --check, writes nothing and fails where a committed .ptx is
# not what its .cu source compiles to (make lint). Set PTXAS to a ptxas
# binary (e.g. from the nvidia-cuda-nvcc-cu12 wheel) to also check the
# result for sm_90.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-clang-16}
check=false
[[ ${1:-} == --check ]] && check=true
command -v "$CLANG" >/dev/null || {
  echo "regenerate-ptx: $CLANG not found (apt-get install clang-16, or set CLANG)" >&2
  exit 1
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stale=0
for src in src/cuda/kernels/*.cu; do
  ptx=${src%.cu}.ptx
  built=$out/$(basename "$ptx")
  "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_50 -nocudainc -nocudalib \
    -O3 -S -o "$built" "$src"
  if [[ -n ${PTXAS:-} ]]; then "$PTXAS" -arch=sm_90 -o /dev/null "$built"; fi
  if $check; then
    cmp -s "$built" "$ptx" || { echo "$ptx is not what $src compiles to" >&2; stale=1; }
  else
    cp "$built" "$ptx"
    echo "wrote $ptx"
  fi
done
if ((stale)); then
  echo "run scripts/regenerate-ptx.sh and commit the .ptx files" >&2
  exit 1
fi
