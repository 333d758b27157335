"""Store failures of a write and the staging files of local arrays: a write
that the file system refuses (the disk full, simulated by a file-size limit
in a child process) raises StoreError naming the chunk, for batched chains
and for chains the zarrs pipeline writes alike, and leaves no staging file;
staging files a killed writer left are ignored by reads and removed by the
next write of their chunk."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zarrs_nvcomp

# The batched encoder, and the zarrs pipeline (blosc is not batched).
COMPRESSORS = [
    pytest.param("zstd", id="batched"),
    pytest.param({"id": "blosc", "cname": "lz4", "clevel": 1, "shuffle": 0}, id="zarrs-pipeline"),
]

SHAPE, CHUNKS = (64, 64), (32, 32)


def _staging_files(root) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*#*"))


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_a_full_disk_is_a_store_error_and_leaves_no_staging_file(tmp_path, compressor) -> None:
    path = tmp_path / "full.zarr"
    zarrs_nvcomp.create_array(
        str(path), shape=SHAPE, dtype="float64", chunks=CHUNKS, compressor=compressor
    )
    # Each chunk is 8 KiB of noise; files may hold at most 2 KiB.
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        import numpy as np
        import zarrs_nvcomp
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        data = np.random.default_rng(0).standard_normal({SHAPE})
        try:
            zarrs_nvcomp.write_chunks_parallel({str(path)!r}, data, device="cpu")
        except zarrs_nvcomp.ZarrsNvcompError as e:
            print(type(e).__name__, isinstance(e, OSError), e)
            sys.exit(0)
        sys.exit("the write succeeded")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kind, is_os_error, message = done.stdout.split(" ", 2)
    assert (kind, is_os_error) == ("StoreError", "True"), done.stdout
    assert "c/" in message, message
    assert _staging_files(path) == []


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_a_killed_writers_staging_files_are_ignored_then_removed(tmp_path, compressor) -> None:
    path = tmp_path / "k.zarr"
    array = zarrs_nvcomp.create_array(
        str(path), shape=SHAPE, dtype="int32", chunks=CHUNKS, compressor=compressor
    )
    data = np.arange(64 * 64, dtype=np.int32).reshape(SHAPE)
    array[...] = data
    # What a writer killed mid-write leaves: a staging file of its process,
    # beside the chunk file (and one of a chunk not written again).
    dead = _dead_pid()
    stale = [path / "c" / "0" / f"1#{dead}.7", path / "c" / "1" / f"1#{dead}.3"]
    for file in stale:
        file.write_bytes(b"half a chunk")
    untouched = path / "c" / "1" / f"0#{dead}.9"
    untouched.write_bytes(b"half a chunk")
    # A live process's staging file may be a write in flight: kept.
    live = path / "c" / "0" / "1#1.5"
    live.write_bytes(b"in flight")
    np.testing.assert_array_equal(zarrs_nvcomp.read_chunks_parallel(str(path)), data)
    # The next write of those chunks removes its dead writers' staging files.
    array[:, 32:] = -data[:, 32:]
    data[:, 32:] *= -1
    assert _staging_files(path) == sorted(p.relative_to(path).as_posix() for p in (live, untouched))
    np.testing.assert_array_equal(zarrs_nvcomp.read_chunks_parallel(str(path)), data)
