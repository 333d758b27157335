"""gzip streams of several members (RFC 1952, 2.2; bgzip and ``cat a.gz b.gz``
write them), which zarr-python reads: the CPU decodes them whole, and the GPU
either does too or refuses them, never returning the first member alone."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import zarr

from zarrs_nvcomp import DecodeError, NvCompBatchCodec, read_chunks_parallel


def members(data: bytes, parts: int) -> bytes:
    """``data`` as ``parts`` gzip members, one after the other."""
    step = -(-len(data) // parts)
    return b"".join(gzip.compress(data[i : i + step]) for i in range(0, len(data), step))


def multi_member_array(path: Path) -> np.ndarray:
    """A zarr v3 gzip array whose chunks are rewritten as two members each."""
    data = (np.arange(64 * 48, dtype="f4").reshape(64, 48) % 37) * 0.5
    z = zarr.create_array(
        str(path), shape=data.shape, chunks=(16, 16), dtype=data.dtype,
        compressors=zarr.codecs.GzipCodec(level=5),
    )  # fmt: skip
    z[:] = data
    chunks = [f for f in (path / "c").rglob("*") if f.is_file()]
    assert len(chunks) == 12
    for chunk in chunks:
        chunk.write_bytes(members(gzip.decompress(chunk.read_bytes()), 2))
    return data


def test_codec_decodes_every_member():
    codec = NvCompBatchCodec("gzip", device="cpu")
    data = [np.arange(1024, dtype="f4").tobytes(), b"several members " * 300, b""]
    encoded = [members(data[0], 2), members(data[1], 5), members(data[0], 3) + gzip.compress(b"")]
    decoded = [bytes(d) for d in codec.decode_batch(encoded)]
    assert decoded == [data[0], data[1], data[0]]
    assert bytes(codec.decode(members(data[1], 4))) == data[1]


def test_corrupt_second_members_are_decode_errors():
    codec = NvCompBatchCodec("gzip", device="cpu")
    two = bytearray(members(b"abc" * 1000, 2))
    two[-6] ^= 0xFF  # the last member's CRC-32
    with pytest.raises(DecodeError, match="CRC"):
        codec.decode_batch([bytes(two)])
    with pytest.raises(DecodeError, match="buffer 1"):
        codec.decode_batch([gzip.compress(b"x"), gzip.compress(b"y") + b"not a member"])


def test_reader_reads_multi_member_chunks_as_zarr_python_does(tmp_path):
    path = tmp_path / "members.zarr"
    data = multi_member_array(path)
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[:], data)
    np.testing.assert_array_equal(read_chunks_parallel(str(path), device="cpu"), data)
    np.testing.assert_array_equal(
        read_chunks_parallel(str(path), (slice(5, 50), slice(3, 40)), device="cpu"),
        data[5:50, 3:40],
    )


def test_a_chunk_larger_than_its_shape_is_refused_without_decoding_it_all(tmp_path):
    path = tmp_path / "bomb.zarr"
    z = zarr.create_array(
        str(path), shape=(1024,), chunks=(1024,), dtype="u1", compressors=zarr.codecs.GzipCodec()
    )
    z[:] = np.ones(1024, "u1")
    # 4 MiB of zeros where 1 KiB belongs; its ISIZE is right.
    (path / "c" / "0").write_bytes(gzip.compress(bytes(4 << 20)))
    with pytest.raises(DecodeError, match="more than the limit of 2048 bytes"):
        read_chunks_parallel(str(path), device="cpu", max_decoded_size=2048)
    # Measured through a window for the error, not held.
    with pytest.raises(DecodeError, match="decodes to 4194304 bytes, its shape needs 1024"):
        read_chunks_parallel(str(path), device="cpu")


@pytest.mark.gpu
def test_the_gpu_never_returns_the_first_member_alone(tmp_path):
    # Two identical members: the first alone matches the last trailer's
    # CRC-32 and ISIZE, which is all nvCOMP's result is checked against.
    part = (np.arange(4096, dtype="u4") % 251).tobytes()
    stream = gzip.compress(part) * 2
    codec = NvCompBatchCodec("gzip", device="cuda")
    try:
        got = [bytes(d) for d in codec.decode_batch([stream, gzip.compress(part)])]
    except DecodeError as e:
        assert "several members" in str(e), e
    else:
        assert got == [part * 2, part]
    path = tmp_path / "members.zarr"
    data = multi_member_array(path)
    try:
        got = read_chunks_parallel(str(path), device="cuda")
    except DecodeError as e:
        assert "several members" in str(e), e
    else:
        np.testing.assert_array_equal(got.get() if hasattr(got, "get") else np.asarray(got), data)
