"""Shared fixtures: the `gpu` marker skips, with the engine's reason, where no GPU is usable."""

from __future__ import annotations

import pytest

import zarrs_nvcomp

CPU_ALGORITHMS = ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"]
ALL_ALGORITHMS = [*CPU_ALGORITHMS, "cascaded", "bitcomp", "ans"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gpu: needs a usable CUDA GPU (skipped, with the reason, otherwise)"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        reason = zarrs_nvcomp.gpu_unavailable_reason(0)
        if reason is not None:
            pytest.skip(f"no usable GPU: {reason}")


def cupy_or_skip():
    return pytest.importorskip("cupy", reason="CuPy is not installed")
