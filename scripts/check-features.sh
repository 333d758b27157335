#!/usr/bin/env bash
# Checks that the crate builds, without warnings, with no default features
# and with each feature alone (Cargo.toml's [features]); the default set is
# built by clippy and the tests. `cargo check` only, without dev-dependencies:
# what a user's build with that feature set compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
for features in "" zarrs lzma array http s3; do
    echo "cargo check --no-default-features --features '$features'"
    log=$(cargo check --quiet --package zarrs_nvcomp --lib --bins --no-default-features --features "$features" \
        --message-format short 2>&1) || { echo "$log"; exit 1; }
    if grep -E '(warning|error)' <<<"$log"; then
        exit 1
    fi
done
