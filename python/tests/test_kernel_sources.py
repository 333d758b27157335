"""The CUDA C kernels' arithmetic, compiled for the host and checked against
the reference implementations (zlib, libzstd and c-blosc through numcodecs).

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
from numcodecs import Blosc, Zstd

KERNELS = Path(__file__).resolve().parents[2] / "src" / "cuda" / "kernels"
XXH64_LOW32, ADLER32 = 0, 1


def build(tmp_path_factory, name: str) -> ctypes.CDLL:
    """The kernel source `name`.cu compiled as C into a shared library."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the kernel source for the host")
    lib = tmp_path_factory.mktemp("kernels") / f"{name}.so"
    subprocess.run(
        [cc, "-x", "c", "-O2", "-shared", "-fPIC", "-o", str(lib), str(KERNELS / f"{name}.cu")],
        check=True,
    )
    return ctypes.CDLL(str(lib))


@pytest.fixture(scope="module")
def checksums(tmp_path_factory):
    fn = build(tmp_path_factory, "checksums").checksums
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
    # Around Adler-32's 128 threads per buffer and its modulus 65521 as well.
    lengths = [0, 1, 3, 4, 7, 8, 31, 32, 33, 64, 127, 128, 129, 5551, 5552, 5553]
    lengths += [3 * 5552 + 17, 65521, 65522, 1 << 20]
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


# The unshuffle kernel's kinds and blosc's header flags.
COPY, BYTE, BIT = 0, 1, 2
BLOSC_SHUFFLE, BLOSC_MEMCPYED, BLOSC_BITSHUFFLE, BLOSC_DONT_SPLIT = 0x1, 0x2, 0x4, 0x10


@pytest.fixture(scope="module")
def unshuffle(tmp_path_factory):
    fn = build(tmp_path_factory, "unshuffle").unshuffle
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64]

    def run(blocks: list[np.ndarray], typesizes: list[int], kinds: list[int]) -> list[np.ndarray]:
        outs = [np.full(len(b), 0xA5, np.uint8) for b in blocks]
        n = len(blocks)
        table = np.array(
            [b.ctypes.data for b in blocks]
            + [o.ctypes.data for o in outs]
            + [len(b) for b in blocks]
            + typesizes
            + kinds,
            np.uint64,
        )
        fn(table.ctypes.data, n)
        return outs

    return run


def blosc_shuffled_blocks(chunk: bytes) -> tuple[list[np.ndarray], int, int]:
    """The decoded, still shuffled blocks of a blosc-zstd chunk (its streams
    decoded by libzstd, not by c-blosc), its typesize and flags."""
    flags, typesize = chunk[2], chunk[3]
    nbytes, blocksize = (int.from_bytes(chunk[at : at + 4], "little") for at in (4, 8))
    assert not flags & BLOSC_MEMCPYED, "the sample data compresses"
    assert flags >> 5 == 4, "a zstd chunk"
    blocks = []
    for b in range((nbytes + blocksize - 1) // blocksize):
        block_len = min(blocksize, nbytes - b * blocksize)
        split = (
            not flags & BLOSC_DONT_SPLIT
            and typesize <= 16
            and blocksize // typesize >= 128
            and block_len == blocksize
        )
        nsplits = typesize if split else 1
        at = int.from_bytes(chunk[16 + 4 * b : 20 + 4 * b], "little")
        parts = []
        for _ in range(nsplits):
            size = int.from_bytes(chunk[at : at + 4], "little")
            stream = chunk[at + 4 : at + 4 + size]
            parts.append(stream if size == block_len // nsplits else Zstd().decode(stream))
            at += 4 + size
        blocks.append(np.frombuffer(b"".join(parts), np.uint8).copy())
        assert len(blocks[-1]) == block_len
    return blocks, typesize, flags


@pytest.mark.parametrize("shuffle", [Blosc.NOSHUFFLE, Blosc.SHUFFLE, Blosc.BITSHUFFLE])
@pytest.mark.parametrize("dtype", ["u1", "<u2", "<f4", "<f8"])
@pytest.mark.parametrize(
    ("elements", "blocksize"),
    [
        (40_000, 0),  # c-blosc's own block size
        (4096 + 5, 1024),  # a short last block whose elements are not a multiple of 8
        (3 * 512 + 64, 512),  # short last block bitshuffled; blocks too small to split
    ],
)
def test_unshuffle_matches_c_blosc(unshuffle, shuffle, dtype, elements, blocksize):
    rng = np.random.default_rng(elements)
    data = (np.arange(elements) // 16 + rng.integers(0, 2, elements)).astype(dtype)
    chunk = Blosc(cname="zstd", clevel=1, shuffle=shuffle, blocksize=blocksize).encode(data)
    blocks, typesize, flags = blosc_shuffled_blocks(chunk)
    kind = BYTE if flags & BLOSC_SHUFFLE else BIT if flags & BLOSC_BITSHUFFLE else COPY
    outs = unshuffle(blocks, [typesize] * len(blocks), [kind] * len(blocks))
    expected = np.frombuffer(Blosc().decode(chunk), np.uint8)
    np.testing.assert_array_equal(np.concatenate(outs), expected)
    assert expected.tobytes() == data.tobytes()


@pytest.mark.parametrize("typesize", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("length", [0, 1, 7, 64, 100, 8 * 24 + 5, 4096])
def test_unshuffle_inverts_the_shuffles_and_keeps_trailing_bytes(unshuffle, typesize, length):
    # The forward shuffles written from their definitions; trailing bytes
    # (length % typesize) stay where they are.
    rng = np.random.default_rng(length * 17 + typesize)
    block = rng.integers(0, 256, length, dtype=np.uint8)
    m = length // typesize
    body = block[: m * typesize].reshape(m, typesize)
    byte_shuffled = np.concatenate([body.T.ravel(), block[m * typesize :]])
    bits = np.unpackbits(body, axis=1, bitorder="little").T  # (typesize * 8, m)
    bit_shuffled = np.concatenate(
        [np.packbits(bits, axis=1, bitorder="little").ravel(), block[m * typesize :]]
    )
    bit_ok = m % 8 == 0 and length >= typesize
    cases = [(block, COPY), (byte_shuffled, BYTE), (bit_shuffled if bit_ok else block, BIT)]
    outs = unshuffle([c for c, _ in cases], [typesize] * 3, [k for _, k in cases])
    for out in outs:
        np.testing.assert_array_equal(out, block)


@pytest.fixture(scope="module")
def fill_differs(tmp_path_factory):
    fn = build(tmp_path_factory, "fill").fill_differs
    fn.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_uint64] * 3 + [ctypes.c_void_p]

    def run(buffers: list[np.ndarray], fill: np.ndarray) -> list[bool]:
        """Whether each buffer holds only `fill` (one element), by the kernel."""
        pattern = np.frombuffer(fill.tobytes() * (16 // fill.nbytes), np.uint64)
        ptrs = np.array([b.ctypes.data for b in buffers], np.uint64)
        lens = np.array([b.nbytes for b in buffers], np.uint64)
        differs = np.zeros(len(buffers), np.uint32)
        lo, hi = (int(w) for w in pattern)
        fn(ptrs.ctypes.data, lens.ctypes.data, len(buffers), lo, hi, differs.ctypes.data)
        return [not d for d in differs]

    return run


@pytest.mark.parametrize("dtype", ["u1", "<i2", "<f4", "<f8", "<c16"])
@pytest.mark.parametrize("value", [0, -1.5, 7])
def test_fill_kernel_finds_exactly_the_chunks_of_the_fill_value(fill_differs, dtype, value):
    fill = np.array(value).astype(dtype)
    other = np.array(3).astype(dtype)
    whole = np.full(1000, fill)
    buffers = [whole, whole[1:], whole[:1], np.full(0, fill)]
    expected = [True, True, True, True]
    for at in (0, 1, 499, 998, 999):
        changed = whole.copy()
        changed[at] = other
        buffers.append(changed)
        expected.append(bool(changed[at] == fill))
    # One byte of one element differs: a wrong pattern offset would miss it.
    last_byte = whole.copy().view(np.uint8)
    last_byte[-1] ^= 1
    buffers.append(last_byte)
    expected.append(False)
    assert fill_differs(buffers, fill) == expected
