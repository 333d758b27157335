"""Missing chunks of local arrays, found by listing their directories once per
read (``src/reader/fetch/chunk_dirs.rs``) rather than by a failed ``stat`` each."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr

import zarrs_nvcomp


def sparse(path, shape, chunks, written, zarr_format=3, **create):
    """An array whose chunks are missing but those holding ``written``
    (selections), each set to distinct values."""
    z = zarr.create_array(
        str(path),
        shape=shape,
        chunks=chunks,
        dtype="int32",
        fill_value=-5,
        zarr_format=zarr_format,
        **create,
    )
    for k, sel in enumerate(written):
        z[sel] = 1000 * (k + 1) + np.arange(z[sel].size, dtype="int32").reshape(z[sel].shape)
    return z


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    "shape, chunks, written",
    [
        # One directory of chunk files (v2 "0", v3 "c/0"): a few present.
        ((5000,), (7,), [slice(0, 3), slice(700, 720), slice(4990, 5000)]),
        # One directory per row of chunks, some rows with no directory at all.
        ((40, 3000), (2, 10), [(slice(0, 2), slice(None)), (slice(10, 12), slice(5, 95))]),
        # Nothing written: not even the chunk directory exists.
        ((3000,), (3,), []),
    ],
    ids=["flat", "rows", "empty"],
)
def test_sparse_reads_match_zarr_python(tmp_path, zarr_format, shape, chunks, written):
    path = tmp_path / "a.zarr"
    z = sparse(path, shape, chunks, written, zarr_format=zarr_format)
    expected = z[:]
    np.testing.assert_array_equal(
        zarrs_nvcomp.read_chunks_parallel(str(path), device="cpu"), expected
    )
    np.testing.assert_array_equal(zarrs_nvcomp.open_array(str(path))[:], expected)
    # A selection of part of a listed directory reads the same.
    part = tuple(slice(n // 3, n - n // 4) for n in shape)
    np.testing.assert_array_equal(
        zarrs_nvcomp.read_chunks_parallel(str(path), part, device="cpu"), expected[part]
    )


def test_a_chunk_written_between_reads_is_read_by_the_next(tmp_path):
    # Listings are the read's own: the next read sees what was written since.
    path = tmp_path / "a.zarr"
    z = sparse(path, (2000,), (4,), [slice(0, 4)])
    a = zarrs_nvcomp.open_array(str(path))
    assert (a[:][4:] == -5).all()
    z[1000:1004] = 9
    assert (a[:][1000:1004] == 9).all()


def stat_calls(code: str) -> int:
    """The stat-family system calls a child running ``code`` makes, counted by
    strace."""
    out = subprocess.run(
        [
            "strace",
            "-f",
            "-c",
            "-U",
            "calls",
            "-e",
            "trace=stat,lstat,fstat,newfstatat,statx",
            sys.executable,
            "-c",
            textwrap.dedent(code),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    total = re.search(r"^\s*(\d+)\s+total$", out.stderr, re.M)
    assert total, out.stderr[-3000:]
    return int(total.group(1))


def strace_works() -> str | None:
    """Why strace cannot count a child's system calls here, or None."""
    if shutil.which("strace") is None:
        return "strace is not installed"
    probe = subprocess.run(
        ["strace", "-c", "-e", "trace=statx", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"strace cannot trace here: {probe.stderr.strip()[:200]}"
    return None


def test_a_fill_only_read_does_not_stat_each_missing_chunk(tmp_path):
    reason = strace_works()
    if reason:
        pytest.skip(reason)
    n = 20_000
    path = tmp_path / "a.zarr"
    sparse(path, (n,), (1,), [slice(0, 2), slice(n - 1, n)])
    read = f"""
        import zarrs_nvcomp
        a = zarrs_nvcomp.read_chunks_parallel({str(path)!r}, device="cpu")
        assert a[:2].tolist() == [1000, 1001] and a[-1] == 2000, a
        assert (a[2:-1] == -5).all()
        """
    baseline = stat_calls(f"import zarrs_nvcomp; zarrs_nvcomp.open_array({str(path)!r})")
    # Each missing chunk was asked for with a statx that failed: 20,000 more
    # calls than opening the array. Now its directory is listed once.
    assert stat_calls(read) - baseline < 500
