"""Chunks above 2 GiB: what the codec writes, it reads back (issue 8).

One test of about 2 GiB of memory and a few seconds: the input is NumPy zeros,
whose pages the kernel maps lazily and compression only reads, so the decoded
chunk is the only large resident allocation."""

from __future__ import annotations

import numpy as np

from zarrs_nvcomp import NvCompBatchCodec

SIZE = (2 << 30) + (1 << 20)  # 2 GiB + 1 MiB, the size of the chunk
TAIL = (np.arange(4096) % 251).astype(np.uint8)


def test_zstd_chunk_over_2_gib_round_trips_on_the_cpu():
    data = np.zeros(SIZE, dtype=np.uint8)
    data[-TAIL.size :] = TAIL  # data past 2 GiB, so the end is checked too
    codec = NvCompBatchCodec("zstd", device="cpu")
    encoded = codec.encode(data)
    del data
    assert len(encoded) < 1 << 20
    decoded = codec.decode(encoded)
    assert decoded.nbytes == SIZE
    assert not decoded[: -TAIL.size].any()
    np.testing.assert_array_equal(decoded[-TAIL.size :], TAIL)
