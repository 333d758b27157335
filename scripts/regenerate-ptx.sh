#!/usr/bin/env bash
# Rewrites the committed PTX of the CUDA C kernels in src/cuda/kernels/ with
# clang (Debian's clang-16: `apt-get install clang-16`); no CUDA toolkit is
# needed. Set PTXAS to a ptxas binary (e.g. from the nvidia-cuda-nvcc-cu12
# wheel) to also check the result for sm_90.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-clang-16}
for src in src/cuda/kernels/*.cu; do
  ptx=${src%.cu}.ptx
  "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_50 -nocudainc -nocudalib \
    -O3 -S -o "$ptx" "$src"
  if [[ -n ${PTXAS:-} ]]; then "$PTXAS" -arch=sm_90 -o /dev/null "$ptx"; fi
  echo "wrote $ptx"
done
