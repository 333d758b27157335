#!/usr/bin/env bash
# The MSRV check: fails when a package in Cargo.lock declares a
# `rust-version` above the workspace's own. Only one toolchain is installed
# where this project is built and tested, so this metadata check stands in
# for a build with the oldest supported compiler (docs/development.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --locked | python3 -c '
import json
import sys


def version(text):
    """"1.85" and "1.85.0" as the same comparable tuple."""
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
declared = {p["rust_version"] for p in meta["packages"] if p["id"] in members}
if len(declared) != 1 or None in declared:
    sys.exit(f"workspace members declare rust-version {sorted(map(str, declared))}, not one")
msrv = declared.pop()
needs = sorted(
    (version(p["rust_version"]), p["name"], p["version"], p["rust_version"])
    for p in meta["packages"]
    if p["id"] not in members and p.get("rust_version")
)
over = [n for n in needs if n[0] > version(msrv)]
for _, name, ver, rust in over:
    print(f"{name} {ver} needs Rust {rust}", file=sys.stderr)
if over:
    sys.exit(f"rust-version {msrv} is below what {len(over)} dependencies need: raise it")
_, name, ver, rust = needs[-1]
print(f"rust-version {msrv}: no dependency needs more (the most: {name} {ver}, Rust {rust})")
'
