#!/usr/bin/env bash
# Rewrites nvcomp-sys/src/bindings.rs from nvCOMP's headers with bindgen.
# Needs libclang (`apt-get install libclang-dev`) and the headers: those of
# the nvidia-libnvcomp-cu13 wheel in .venv, or NVCOMP_INCLUDE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCOMP_SYS_WRITE_BINDINGS=1 cargo test -p nvcomp-sys --test bindings -- --nocapture
cargo test -p nvcomp-sys --test bindings
