"""Reads while another process rewrites whole chunks or shards (a new file
renamed over each path, as zarr-python and our writer store them): every
read sees, chunk by chunk, the old chunk or the new one, never an error.
The local fetch took a file's length from one ``stat`` and then opened the
path again, so a rename in between failed reads ("unexpected end of file",
or a Zstandard block "runs past the end"); a shard's index and its inner
chunks were read through two opens, so a read could take the old index
over the new chunks: corrupt chunks, or the wrong elements."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from conftest import cupy_or_skip

import zarrs_nvcomp

CHUNK = 4096
CHUNKS = 8


def versions() -> list[np.ndarray]:
    """Two contents per chunk whose zstd encodings differ in length."""
    rng = np.random.default_rng(0)
    plain = np.ones(CHUNK * CHUNKS, dtype="f4")  # not the fill value: stored
    noisy = rng.standard_normal(CHUNK * CHUNKS).astype("f4")
    return [plain, noisy]


@pytest.mark.parametrize("layout", ["chunks", "shards"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_reads_during_renames_see_old_or_new_chunks(tmp_path, device, layout):
    if device == "cuda":
        cupy_or_skip()
    sources = []
    for k, data in enumerate(versions()):
        source = tmp_path / f"v{k}.zarr"
        # Shards of four inner chunks each: CHUNKS / 4 files.
        shards = {"shards": (4 * CHUNK,), "chunks": (CHUNK,)} if layout == "shards" else {}
        array = zarr.create_array(
            str(source), shape=data.shape, dtype="f4", **({"chunks": (CHUNK,)} | shards)
        )
        array[:] = data
        sources.append(source)
    target = tmp_path / "a.zarr"
    subprocess.run(["cp", "-r", str(sources[0]), str(target)], check=True)
    files = CHUNKS if layout == "chunks" else CHUNKS // 4
    sizes = {(sources[k] / "c" / "0").stat().st_size for k in range(2)}
    assert len(sizes) == 2, "the two versions must differ in length"

    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import os, shutil, time
                sources, target = {[str(s) for s in sources]!r}, {str(target)!r}
                end = time.monotonic() + 4
                k = 0
                while time.monotonic() < end:
                    k ^= 1
                    for i in range({files}):
                        tmp = os.path.join(target, "c", f".{{i}}.tmp")
                        shutil.copyfile(os.path.join(sources[k], "c", str(i)), tmp)
                        os.replace(tmp, os.path.join(target, "c", str(i)))
                """
            ),
        ]
    )
    expected = versions()
    reads = 0
    try:
        array = zarrs_nvcomp.open_array(str(target))
        while writer.poll() is None:
            got = array.read(device=device)
            if device == "cuda":
                got = got.get()
            reads += 1
            for i in range(CHUNKS):
                part = slice(i * CHUNK, (i + 1) * CHUNK)
                assert any(np.array_equal(got[part], v[part]) for v in expected), (reads, i)
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0, "the writer failed"
    assert reads >= 20, f"only {reads} reads overlapped the rewrites"
