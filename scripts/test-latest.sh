#!/usr/bin/env bash
# Runs the Python tests in the fresh virtual environment $2 with the newest
# releases python/requirements-dev.txt admits, unlocked, and the wheel of $1
# (make test-latest, outside CI): what the next `make lock` would bring in,
# found before a user finds it. Prints the versions that differ from the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
wheels=("$1"/zarrs_nvcomp-*.whl)
((${#wheels[@]} == 1)) || { echo "expected one wheel in $1, found: ${wheels[*]}" >&2; exit 1; }
venv=$2
[[ $venv = /* ]] || venv=$root/$venv
rm -rf "$venv"
python3 -m venv "$venv"
py=$venv/bin/python
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q --upgrade -r python/requirements-dev.txt
"$py" -m pip install -q --no-deps --force-reinstall "${wheels[0]}"
"$py" -m pip check
version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
lock=python/locks/dev-py$version.txt
echo "newer than $lock:"
"$py" - "$lock" <<'PY'
import importlib.metadata
import re
import sys

pins = dict(re.findall(r"^([A-Za-z0-9_.\-]+)==([^ \\\n]+)", open(sys.argv[1]).read(), re.M))
canon = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pins.items()}
for dist in sorted(importlib.metadata.distributions(), key=lambda d: d.metadata["Name"].lower()):
    name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
    if name in canon and canon[name] != dist.version:
        print(f"  {name} {canon[name]} -> {dist.version}")
PY
"$py" -m pytest -q -p no:cacheprovider python/tests
bash scripts/zarr-pipeline-tests.sh "$py"
