"""Bitstream compatibility with numcodecs' own codecs, both ways."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from conftest import CPU_ALGORITHMS
from numcodecs.compat import ensure_contiguous_ndarray

from zarrs_nvcomp import NvCompBatchCodec

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def samples() -> list[np.ndarray]:
    rng = np.random.default_rng(42)
    walk = np.cumsum(rng.standard_normal(50_000)).round(2).astype(np.float32)
    return [
        walk,
        np.arange(10_000, dtype=np.int64),
        rng.integers(0, 256, 3_000, dtype=np.uint8),
        np.zeros(1, dtype=np.uint8),
        np.zeros(0, dtype=np.uint8),
        np.frombuffer(b"hello hello hello hello" * 100, dtype=np.uint8),
    ]


def as_bytes(x) -> bytes:
    return bytes(ensure_contiguous_ndarray(x).view(np.uint8))


def zlib_to_deflate(payload: bytes) -> bytes:
    return payload[2:-4]


def deflate_to_zlib(raw: bytes, data: bytes) -> bytes:
    return b"\x78\x9c" + raw + struct.pack(">I", zlib.adler32(data))


PAIRS = [
    ("lz4", numcodecs.LZ4, None, None),
    ("zstd", numcodecs.Zstd, None, None),
    ("gzip", numcodecs.GZip, None, None),
    ("deflate", numcodecs.Zlib, zlib_to_deflate, deflate_to_zlib),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("algorithm", "theirs", "to_ours", "to_theirs"), PAIRS)
def test_numcodecs_to_nvcomp(device, algorithm, theirs, to_ours, to_theirs):
    ours = NvCompBatchCodec(algorithm, device=device)
    data = samples()
    encoded = [as_bytes(theirs().encode(d)) for d in data]
    if to_ours:
        encoded = [to_ours(e) for e in encoded]
    decoded = ours.decode_batch(encoded)
    for d, got in zip(data, decoded, strict=True):
        assert as_bytes(got) == d.tobytes()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("algorithm", "theirs", "to_ours", "to_theirs"), PAIRS)
def test_nvcomp_to_numcodecs(device, algorithm, theirs, to_ours, to_theirs):
    ours = NvCompBatchCodec(algorithm, device=device)
    data = samples()
    encoded = ours.encode_batch(data)
    for d, e in zip(data, encoded, strict=True):
        if d.nbytes == 0 and algorithm in ("lz4", "zstd"):
            # numcodecs' LZ4 and Zstd cannot decode even their own empty encodings
            assert as_bytes(ours.decode(e)) == b""
            continue
        e = as_bytes(e)
        if to_theirs:
            e = to_theirs(e, d.tobytes())
        assert as_bytes(theirs().decode(e)) == d.tobytes()


GPU_ZARR2 = Path(__file__).parent / "fixture" / "zarr2_gpu"


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_zarr2_store_written_on_the_gpu_reads_here(algorithm):
    # Written on the H200 by scripts/write_gpu_zarr2_fixture.py; read with
    # whatever backend this machine has (the CPU in CI).
    z = zarr.open_array(str(GPU_ZARR2 / f"{algorithm}.zarr"), mode="r")
    assert z.attrs["written_by"].startswith("zarrs_nvcomp on cuda"), dict(z.attrs)
    np.testing.assert_array_equal(z[:], np.load(GPU_ZARR2 / "expected.npy"))
