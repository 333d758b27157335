"""``decode_batch(bufs, out=buffer, offsets=...)``: one preallocated buffer
(NumPy on the CPU, CuPy on the GPU) plus where each decoded buffer goes, as
``n + 1`` boundaries or ``n`` ``(start, end)`` pairs; ranges out of bounds,
backwards or overlapping are a ``ValueError`` naming the buffers."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_ALGORITHMS, cuda_codec, cupy_or_skip

from zarrs_nvcomp import InvalidArgumentError, NvCompBatchCodec


def items(*, empty: bool = True) -> list[bytes]:
    """Five buffers of different sizes and contents, the first empty unless not ``empty``."""
    sizes = [0 if empty else 40, 317, 600, 917, 1200]
    return [bytes((i * 7 + k) % 251 for k in range(n)) for i, n in enumerate(sizes)]


def boundaries(data: list[bytes]) -> np.ndarray:
    return np.cumsum([0, *map(len, data)])


def decode_and_check(codec, encoded, data, xp, to_bytes) -> None:
    """The behaviour the host and the device share: both forms of offsets,
    and every refusal, on the array module ``xp``."""
    bounds = boundaries(data)
    total = int(bounds[-1])
    whole = xp.full(total + 8, 0xEE, dtype=xp.uint8)
    # n + 1 boundaries, starting 8 bytes in: the bytes before stay as they were.
    assert codec.decode_batch(encoded, out=whole, offsets=bounds + 8) is whole
    assert to_bytes(whole[:8]) == b"\xee" * 8
    assert to_bytes(whole[8:]) == b"".join(data)

    # (start, end) pairs, the last buffer first in memory, 16-byte gaps between them.
    ranges = np.zeros((len(data), 2), dtype=np.int64)
    at = 0
    for i in reversed(range(len(data))):
        ranges[i] = (at, at + len(data[i]))
        at += len(data[i]) + 16
    spaced = xp.zeros(at, dtype=xp.uint8)
    codec.decode_batch(encoded, out=spaced, offsets=ranges)
    for (start, end), d in zip(ranges.tolist(), data, strict=True):
        assert to_bytes(spaced[start:end]) == d

    fresh = xp.zeros(total, dtype=xp.uint8)
    with pytest.raises(ValueError, match=r"item 4 ends at byte \d+, past the end of out"):
        codec.decode_batch(encoded, out=fresh[:-1], offsets=bounds)
    backwards = bounds.copy()
    backwards[2], backwards[3] = backwards[3], backwards[2]
    with pytest.raises(ValueError, match=r"item 2 ends at byte \d+ before it starts"):
        codec.decode_batch(encoded, out=fresh, offsets=backwards)
    overlapping = np.stack([bounds[:-1], bounds[1:]], axis=1)
    overlapping[3] -= 10
    with pytest.raises(ValueError, match=r"output buffer [23] overlaps output buffer [23]"):
        codec.decode_batch(encoded, out=fresh, offsets=overlapping)
    # A range of the wrong size is the engine's size error, naming the buffer.
    short = np.stack([bounds[:-1], bounds[1:]], axis=1)
    short[1, 1] -= 1
    with pytest.raises(ValueError, match="buffer 1"):
        codec.decode_batch(encoded, out=fresh, offsets=short)
    with pytest.raises(ValueError, match=r"6 boundaries or 5 \(start, end\) pairs"):
        codec.decode_batch(encoded, out=fresh, offsets=bounds[:-1])
    with pytest.raises(ValueError, match="negative"):
        codec.decode_batch(encoded, out=fresh, offsets=bounds - 1)
    with pytest.raises(ValueError, match="integers"):
        codec.decode_batch(encoded, out=fresh, offsets=bounds.astype(float))


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_host_buffer_plus_offsets(algorithm):
    codec = NvCompBatchCodec(algorithm, device="cpu")
    data = items()
    encoded = codec.encode_batch(data)
    decode_and_check(codec, encoded, data, np, lambda a: a.tobytes())


def test_host_refusals_that_need_no_decode():
    codec = NvCompBatchCodec("lz4", device="cpu")
    data = items()
    encoded = codec.encode_batch(data)
    bounds = boundaries(data)
    whole = np.zeros(int(bounds[-1]), dtype=np.uint8)
    with pytest.raises(InvalidArgumentError, match="needs out= to be one buffer, not None"):
        codec.decode_batch(encoded, offsets=bounds)
    with pytest.raises(InvalidArgumentError, match="not a list"):
        codec.decode_batch(encoded, out=[whole], offsets=bounds)
    with pytest.raises(ValueError, match="read-only"):
        codec.decode_batch(encoded, out=bytes(len(whole)), offsets=bounds)
    # An input inside out is refused before anything is written.
    shared = np.zeros(len(data[1]) + len(encoded[1]), dtype=np.uint8)
    shared[: len(encoded[1])] = np.frombuffer(encoded[1], dtype=np.uint8)
    with pytest.raises(ValueError, match=r"overlaps (input|output) buffer 0"):
        codec.decode_batch([shared[: len(encoded[1])]], out=shared, offsets=[0, len(data[1])])
    assert codec.decode_batch([], out=whole, offsets=[0]) is whole


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", [*CPU_ALGORITHMS, "ans"])
def test_device_buffer_plus_offsets(algorithm):
    cp, codec = cuda_codec(algorithm, trusted_input=True)
    # nvCOMP's ANS has no CPU twin to encode an empty buffer with.
    data = items(empty=algorithm != "ans")
    encoded = [cp.asarray(np.frombuffer(e, dtype=np.uint8)) for e in codec.encode_batch(data)]
    decode_and_check(codec, encoded, data, cp, lambda a: a.get().tobytes())
    # The default (untrusted) mode decodes the same bytes into the buffer.
    untrusted = NvCompBatchCodec(algorithm, device="cuda")
    bounds = boundaries(data)
    whole = cp.zeros(int(bounds[-1]), dtype=cp.uint8)
    untrusted.decode_batch(encoded, out=whole, offsets=bounds)
    assert whole.get().tobytes() == b"".join(data)


@pytest.mark.gpu
def test_device_buffer_plus_offsets_on_the_cpu_backend():
    """Device data given to a CPU codec goes through host memory into the
    same ranges of the device buffer, with the same refusals."""
    cp = cupy_or_skip()
    codec = NvCompBatchCodec("zstd", device="cpu")
    data = items()
    encoded = [cp.asarray(np.frombuffer(e, dtype=np.uint8)) for e in codec.encode_batch(data)]
    decode_and_check(codec, encoded, data, cp, lambda a: a.get().tobytes())


@pytest.mark.gpu
def test_device_buffer_must_be_on_the_inputs_side():
    cp, codec = cuda_codec("lz4")
    data = items()
    host = codec.encode_batch(data)
    bounds = boundaries(data)
    with pytest.raises(ValueError, match="same side"):
        codec.decode_batch(host, out=cp.zeros(int(bounds[-1]), dtype=cp.uint8), offsets=bounds)
