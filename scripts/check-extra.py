"""Checks that an installed extra of zarrs-nvcomp gives what it promises:
its requirements installed and mutually consistent, and the modules it is
for importable beside zarrs_nvcomp. Run by scripts/wheel-check.sh in a fresh
venv per extra; exits non-zero, naming what failed, on a broken extra.

    python scripts/check-extra.py EXTRA
"""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys

from packaging.requirements import Requirement

# What each extra is for: "module" imports it, "module:name" also takes the
# attribute. The zarrs_nvcomp modules are those that use the extra.
PROMISES = {
    "zarr": [
        "zarr",
        "zarrs_nvcomp.zarr3:NvCompBatchZarrCodec",
        "zarrs_nvcomp.pipeline",
    ],
    "xarray": ["zarr", "xarray", "xarray.backends.zarr", "zarrs_nvcomp.pipeline"],
    "dask": [
        "dask.array",
        "distributed",
        "dask.distributed:Client",
        "zarrs_nvcomp.dask:to_dask",
    ],
    "cu12": ["cupy", "nvidia.libnvcomp"],
    "cu13": ["cupy", "nvidia.libnvcomp"],
    "gpu": ["cupy", "nvidia.libnvcomp"],
}


def requirements(extra: str) -> list[Requirement]:
    """The requirements `zarrs-nvcomp[extra]` adds, from the installed metadata."""
    found = []
    for line in importlib.metadata.requires("zarrs-nvcomp") or []:
        req = Requirement(line)
        marker = req.marker
        if (
            marker is not None
            and marker.evaluate({"extra": extra})
            and not marker.evaluate({"extra": ""})
        ):
            found.append(req)
    return found


def check(extra: str) -> list[str]:
    problems = []
    if extra not in PROMISES:
        return [f"no promises listed for the extra [{extra}] in {__file__}"]
    declared = requirements(extra)
    if not declared:
        problems.append(f"the installed zarrs-nvcomp declares no extra [{extra}]")
    for req in declared:
        if req.name == "zarrs-nvcomp":
            continue
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{req} is not installed")
            continue
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name} {version} is installed, outside {req}")
    # pip's own consistency check over everything installed.
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    if pip.returncode != 0:
        problems.append(f"pip check: {pip.stdout.strip()}")
    import zarrs_nvcomp  # noqa: F401  (the package imports before its extras)

    for promise in PROMISES[extra]:
        module, _, name = promise.partition(":")
        try:
            imported = importlib.import_module(module)
            if name:
                getattr(imported, name)
        except Exception as err:  # noqa: BLE001  (any failure to import is the finding)
            problems.append(f"{promise}: {type(err).__name__}: {err}")
    return problems


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    extra = sys.argv[1]
    problems = check(extra)
    if problems:
        print(f"extra [{extra}] is broken:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    pins = ", ".join(
        f"zarrs-nvcomp[{','.join(sorted(r.extras))}]"
        if r.name == "zarrs-nvcomp"
        else f"{r.name} {importlib.metadata.version(r.name)}"
        for r in requirements(extra)
    )
    print(f"extra [{extra}]: {pins}; imports {', '.join(PROMISES[extra])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
