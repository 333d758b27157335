"""What an installation gives: the extras' requirements, nvCOMP found through
the import system wherever Python runs, and reasons that say how to fix a
missing GPU. Runs from the development venv and from the installed wheel
(`make wheel-check`)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import zarrs_nvcomp
from zarrs_nvcomp import _cupy_builds, _nvcomp_wheel


def extra_requirements(distribution: str, extra: str) -> list[Requirement]:
    """The requirements `distribution[extra]` adds, from its installed metadata."""
    found = []
    for line in importlib.metadata.requires(distribution) or []:
        req = Requirement(line)
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            if not req.marker.evaluate({"extra": ""}):
                found.append(req)
    return found


def cupy_of(requirements: list[Requirement]) -> list[str]:
    return _cupy_builds.cupy_builds(r.name for r in requirements)


@pytest.mark.parametrize("cuda", ["cu12", "cu13"])
def test_cuda_extras_pull_the_nvcomp_major_the_loader_opens_and_one_cupy(cuda):
    requirements = extra_requirements("zarrs-nvcomp", cuda)
    by_name = {r.name: r for r in requirements}
    assert set(by_name) == {f"nvidia-libnvcomp-{cuda}", f"cupy-cuda{cuda[2:]}x"}
    major = int(_nvcomp_wheel.LIBRARY_NAME.rsplit(".", 1)[1])
    nvcomp = by_name[f"nvidia-libnvcomp-{cuda}"].specifier
    assert f"{major}.0.0.12" in nvcomp and f"{major + 1}.0.0" not in nvcomp
    assert f"{major - 1}.3.0.16" not in nvcomp


def test_gpu_extra_is_cu13():
    assert [str(r).split(";")[0] for r in extra_requirements("zarrs-nvcomp", "gpu")] == [
        "zarrs-nvcomp[cu13]"
    ]


def test_cu12_extra_shares_zarr_gpu_cupy():
    try:
        zarr_gpu = extra_requirements("zarr", "gpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("zarr is not installed")
    assert cupy_of(zarr_gpu), "zarr[gpu] no longer pulls CuPy: revisit the extras"
    assert cupy_of(extra_requirements("zarrs-nvcomp", "cu12")) == cupy_of(zarr_gpu)


def test_several_cupy_builds_are_spotted():
    names = ["numpy", "cupy-cuda12x", "cupy_cuda13x", "cupyx-extra", "zarr", "CuPy"]
    assert _cupy_builds.cupy_builds(names) == ["cupy", "cupy-cuda12x", "cupy-cuda13x"]
    assert _cupy_builds.cupy_builds(["cupy-cuda12x", "numpy"]) == ["cupy-cuda12x"]


def test_several_cupy_builds_warn(monkeypatch):
    class Dist:
        def __init__(self, name):
            self.metadata = {"Name": name}

    fake = [Dist("numpy"), Dist("cupy-cuda12x"), Dist("cupy-cuda13x")]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter(fake))
    with pytest.warns(UserWarning, match=r"several CuPy builds .*cupy-cuda12x, cupy-cuda13x"):
        _cupy_builds.warn_if_several()
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter(fake[:2]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _cupy_builds.warn_if_several()


def run_clean(code: str) -> dict:
    """Runs `code` in this venv's Python started by absolute path with an empty
    environment (no VIRTUAL_ENV, no PYTHONPATH), as a Jupyter kernel or a
    cron job would; `code` prints one JSON object."""
    env = []
    bare = subprocess.run(["env", "-i", sys.executable, "-c", "import zarrs_nvcomp"], check=False)
    if bare.returncode != 0 and "PYTHONPATH" in os.environ:
        # Installed on PYTHONPATH rather than in a venv (the GPU machine's
        # test setup): keep only that, so that the package imports at all.
        env = [f"PYTHONPATH={os.environ['PYTHONPATH']}"]
    out = subprocess.run(
        ["env", "-i", *env, sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


LOCATE = """
import json, zarrs_nvcomp
from zarrs_nvcomp import _nvcomp_wheel
wheel = _nvcomp_wheel.wheel_library()
print(json.dumps({
    "wheel": None if wheel is None else str(wheel),
    "candidates": zarrs_nvcomp.nvcomp_library_candidates(),
    "loaded": zarrs_nvcomp.nvcomp_library_path(),
    "reason": zarrs_nvcomp.gpu_unavailable_reason(0),
}))
"""


def wheel_or_skip() -> Path:
    wheel = _nvcomp_wheel.wheel_library()
    if wheel is None:
        pytest.skip("no nvidia-libnvcomp-cu13/-cu12 wheel installed in this Python")
    return wheel


def test_nvcomp_wheel_found_without_environment():
    wheel = wheel_or_skip()
    found = run_clean(LOCATE)
    assert found["wheel"] == str(wheel)
    # Without VIRTUAL_ENV and PYTHONPATH only the import system finds the
    # wheel: its library is the loader's first candidate, and its only mention.
    assert found["candidates"][0] == str(wheel)
    assert found["candidates"].count(str(wheel)) == 1
    # Opening nvCOMP needs no GPU (it links only libc, libstdc++ and libm).
    assert found["loaded"] == str(wheel), found
    print(f"nvCOMP loaded from {found['loaded']}")


@pytest.mark.gpu
def test_nvcomp_wheel_runs_on_the_gpu_without_environment():
    wheel = wheel_or_skip()
    found = run_clean(LOCATE)
    assert found["reason"] is None, found["reason"]
    assert found["loaded"] == str(wheel)
    print(f"nvCOMP loaded from {found['loaded']}")


def test_nvcomp_library_path_is_fixed_once_opened():
    loaded = zarrs_nvcomp.nvcomp_library_path()
    with pytest.raises(RuntimeError, match="already"):
        zarrs_nvcomp.set_nvcomp_library_path("/elsewhere/libnvcomp.so.6")
    assert zarrs_nvcomp.nvcomp_library_path() == loaded


def test_unavailable_gpu_reason_says_how_to_fix():
    reason = zarrs_nvcomp.gpu_unavailable_reason(0)
    if reason is None:
        pytest.skip("a GPU is usable here")
    fixes = {
        "no libcuda:": "install the NVIDIA driver",
        "no device:": "nvidia-smi",
        "driver too old:": "update the NVIDIA driver",
        "nvCOMP missing:": "pip install",
        "nvCOMP version mismatch:": "pip install",
        "nvCOMP and driver mismatch:": "pip install",
    }
    prefix = next((p for p in fixes if reason.startswith(p)), None)
    assert prefix is not None, reason
    assert fixes[prefix] in reason, reason
    print(reason)


def test_no_libcuda_reason_here():
    import ctypes.util

    if ctypes.util.find_library("cuda") is not None:
        pytest.skip("libcuda is installed here")
    reason = zarrs_nvcomp.gpu_unavailable_reason(0)
    assert reason is not None and reason.startswith("no libcuda: "), reason
    assert 'device="cpu"' in reason
