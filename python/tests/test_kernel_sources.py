"""The CUDA C kernels' arithmetic, compiled for the host and checked against
the reference implementations (zlib, libzstd through numcodecs).

The PTX that the GPU runs is generated from the same source
(`scripts/regenerate-ptx.sh`); the GPU tests check it on the device. These
tests catch an arithmetic mistake on any machine with a C compiler."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from numcodecs import Zstd

KERNELS = Path(__file__).resolve().parents[2] / "src" / "cuda" / "kernels"
XXH64_LOW32, ADLER32 = 0, 1


@pytest.fixture(scope="module")
def checksums(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the kernel source for the host")
    lib = tmp_path_factory.mktemp("kernels") / "checksums.so"
    subprocess.run(
        [cc, "-x", "c", "-O2", "-shared", "-fPIC", "-o", str(lib), str(KERNELS / "checksums.cu")],
        check=True,
    )
    fn = ctypes.CDLL(str(lib)).checksums
    fn.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_void_p,
    ]

    def run(buffers: list[bytes], kind: int, misalign: int = 0) -> list[int]:
        # Each buffer `misalign` bytes past an 8-byte boundary.
        keep = [np.zeros(len(b) + 16, np.uint8) for b in buffers]
        ptrs = []
        for arr, b in zip(keep, buffers, strict=True):
            at = (-arr.ctypes.data) % 8 + misalign
            arr[at : at + len(b)] = np.frombuffer(b, np.uint8)
            ptrs.append(arr.ctypes.data + at)
        n = len(buffers)
        addresses = np.array(ptrs, np.uint64)
        lengths = np.array([len(b) for b in buffers], np.uint64)
        sums = np.zeros(n, np.uint32)
        fn(addresses.ctypes.data, lengths.ctypes.data, n, kind, sums.ctypes.data)
        return [int(s) for s in sums]

    return run


def sample_buffers() -> list[bytes]:
    rng = np.random.default_rng(7)
    lengths = [0, 1, 3, 4, 7, 8, 31, 32, 33, 64, 5551, 5552, 5553, 3 * 5552 + 17, 1 << 20]
    out = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
    out.append(b"\xff" * 100_000)  # the largest sums Adler-32 must reduce
    return out


@pytest.mark.parametrize("misalign", [0, 1, 5])
def test_adler32_matches_zlib(checksums, misalign):
    buffers = sample_buffers()
    assert checksums(buffers, ADLER32, misalign) == [zlib.adler32(b) for b in buffers]


@pytest.mark.parametrize("misalign", [0, 3])
def test_xxh64_low32_matches_zstd_content_checksums(checksums, misalign):
    buffers = [b for b in sample_buffers() if b]
    stored = []
    for b in buffers:
        frame = Zstd(level=1, checksum=True).encode(b)
        assert frame[4] & 0x04, "the frame carries a content checksum"
        stored.append(int.from_bytes(frame[-4:], "little"))
    assert checksums(buffers, XXH64_LOW32, misalign) == stored
