"""A broadcast value (``a[:] = 0``) is written piece by piece, whole chunks
each, never as the whole selection: on a ``[2**40]`` array it was a NumPy
``MemoryError`` "Unable to allocate 1.00 TiB"."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_memory_bounds import MiB, run_child

import zarrs_nvcomp
from zarrs_nvcomp import _write


@pytest.mark.parametrize(
    ("start", "box", "chunks", "budget"),
    [
        ([0], [100], (10,), 35),
        ([3], [95], (10,), 35),
        ([3, 5], [17, 29], (4, 6), 4 * 29),
        ([3, 5], [17, 29], (4, 6), 4 * 6 * 3),
        ([0, 0, 0], [9, 9, 9], (2, 3, 4), 1),
        ([7], [1], (10,), 1),
    ],
)
def test_pieces_cover_the_box_once_in_whole_chunks(monkeypatch, start, box, chunks, budget):
    monkeypatch.setattr(_write, "BROADCAST_PIECE_BYTES", budget)
    covered = np.zeros(box, dtype=int)
    chunk_of = {}
    for offset, lens in _write.chunk_aligned_pieces(start, box, chunks, 1):
        region = tuple(slice(o, o + n) for o, n in zip(offset, lens, strict=True))
        covered[region] += 1
        one_chunk = int(np.prod(chunks))
        assert int(np.prod(lens)) <= max(budget, one_chunk), (offset, lens)
        # Every chunk the piece touches is touched by no other piece.
        ranges = [
            range((s + o) // c, (s + o + n - 1) // c + 1)
            for s, o, n, c in zip(start, offset, lens, chunks, strict=True)
        ]
        for index in itertools.product(*ranges):
            assert chunk_of.setdefault(index, tuple(offset)) == tuple(offset), index
    assert (covered == 1).all()


def test_scalar_write_of_an_array_larger_than_memory_allows(tmp_path):
    # 2 GiB of uint8 under 1 GiB more address space: the whole selection
    # cannot be made, and need not be.
    path = tmp_path / "a.zarr"
    zarrs_nvcomp.create_array(str(path), shape=(2**31,), chunks=(2**24,), dtype="uint8")
    out = run_child(
        f"""
        array = zarrs_nvcomp.open_array({str(path)!r})
        def write():
            array[:] = 7
            array[2**30 : 2**30 + 5] = 0
            return [int(v) for v in array.read((slice(2**30 - 2, 2**30 + 7),), device="cpu")]
        report(measure(write))
        """,
        address_space_extra=1 << 30,
        timeout=300,
    )
    assert out["result"] == [7, 7, 0, 0, 0, 0, 0, 7, 7], out
    assert out["peak_growth"] < 900 * MiB, out
    array = zarrs_nvcomp.open_array(str(path))
    assert int(array[2**31 - 1]) == 7 and int(array[0]) == 7
