"""Sizes from metadata and from the store, on the release wheel: chunk
shapes whose byte counts overflow are a ``ValueError`` (as zarr-python's),
a stored chunk larger than any encoding of it is refused unread, reads of
many tiny chunks plan them in batches (bounded memory), as do writes,
small selections of arrays of billions of chunks are fast, and metadata of more
dimensions than NumPy's arrays have is refused at once.

Cases that could exhaust memory run in a child whose address space is
limited (``run_child`` of ``test_memory_bounds``)."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import numcodecs
import numpy as np
import pytest
from test_memory_bounds import MiB, run_child, sparse_array

import zarrs_nvcomp
from zarrs_nvcomp import DecodeError, InvalidArgumentError


def write_v3(path: Path, shape, chunks, codecs, data_type="float32") -> None:
    path.mkdir(parents=True, exist_ok=True)
    metadata = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": codecs,
    }
    (path / "zarr.json").write_text(json.dumps(metadata))


BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
ZSTD = [BYTES, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}]


@pytest.mark.parametrize("codecs", [[BYTES], ZSTD], ids=["uncompressed", "zstd"])
def test_chunk_shape_whose_bytes_overflow_is_a_value_error(tmp_path, codecs):
    # (2^63 + 1) * 2 * 4 bytes wrapped to 8: an 8-byte file read as the chunk.
    path = tmp_path / "a.zarr"
    write_v3(path, (3, 2), (2**63 + 1, 2), codecs)
    (path / "c" / "0").mkdir(parents=True)
    (path / "c" / "0" / "0").write_bytes(np.array([0, 1], dtype="<f4").tobytes())
    array = zarrs_nvcomp.open_array(str(path))
    with pytest.raises(InvalidArgumentError, match="chunk_shape") as raised:
        array.read((0,), device="cpu")
    assert isinstance(raised.value, ValueError)


def read_in_child(path: Path) -> dict:
    """A whole CPU read of ``path`` in a child of 1 GiB more address space (a
    regression aborts there, not in pytest): its error and peak growth."""
    return run_child(
        f"""
        path = {str(path)!r}
        report(measure(lambda: zarrs_nvcomp.read_chunks_parallel(path, device="cpu")))
        """,
        address_space_extra=1 << 30,
    )


def test_huge_sparse_chunk_file_is_refused_unread(tmp_path):
    path = tmp_path / "a.zarr"
    write_v3(path, (10,), (5,), ZSTD)
    (path / "c").mkdir()
    with open(path / "c" / "1", "wb") as f:
        f.truncate(20 << 30)
    out = read_in_child(path)
    assert "DecodeError" in out["classes"], out
    assert "c/1" in out["result"] and str(20 << 30) in out["result"], out
    assert out["peak_growth"] < 64 * MiB, out
    with pytest.raises(DecodeError, match="c/1"):
        zarrs_nvcomp.open_array(str(path)).read(device="cpu")


UNBATCHED = {
    "v3-uncompressed": (3, None, None, "c/1"),
    "v2-uncompressed": (2, None, None, "1"),
    "v2-bz2": (2, numcodecs.BZ2(level=1), None, "1"),
    "v3-uncompressed-shard": (3, None, (5,), "c/1"),
}


@pytest.mark.parametrize("case", UNBATCHED)
def test_huge_sparse_chunk_file_of_an_unbatched_chain_is_refused_unread(tmp_path, case):
    # The fallback path (zarrs) read the whole file: an abort, allocating 20 GiB.
    zarr_format, compressor, shards, key = UNBATCHED[case]
    path = tmp_path / "a.zarr"
    zarrs_nvcomp.create_array(
        str(path),
        shape=(10,),
        chunks=(5,) if shards is None else (1,),
        shards=shards,
        dtype="float32",
        compressors=compressor,
        zarr_format=zarr_format,
        data=np.arange(10, dtype="f4"),
    )
    with open(path / key, "r+b") as f:
        f.truncate(20 << 30)
    out = read_in_child(path)
    assert "ZarrsNvcompError" in out["classes"], out
    assert key in out["result"], out
    assert out["peak_growth"] < 64 * MiB, out
    # The other chunk reads as it was written.
    first = zarrs_nvcomp.read_chunks_parallel(str(path), (slice(0, 5),), device="cpu")
    np.testing.assert_array_equal(first, np.arange(5, dtype="f4"))


def tiny_chunks_child(path: Path, n: int, body: str) -> dict:
    """Runs ``body``, which defines ``run()``, in a child (``path`` and ``n``
    bound) and returns ``measure(run)``."""
    code = f"path = {str(path)!r}\nn = {n}\n" + textwrap.dedent(body) + "report(measure(run))\n"
    return run_child(code, address_space_extra=2 << 30)


def tiny_chunks_read(path: Path, n: int) -> dict:
    """A read, in a child, of an array of ``n`` one-float chunks of which the
    first five and last three are written."""
    z = sparse_array(path, (n,), (1,))
    z[:5] = np.arange(5, dtype=np.float32)
    z[n - 3 :] = -np.arange(3, dtype=np.float32)
    body = """
        def run():
            a = zarrs_nvcomp.read_chunks_parallel(path, device="cpu")
            return [a[:6].tolist(), a[-4:].tolist(), int((a == 7).sum())]
        """
    return tiny_chunks_child(path, n, body)


def test_many_tiny_chunks_are_planned_in_bounded_memory(tmp_path):
    # The whole plan was about 560 bytes a chunk (a read of 10^7 chunks of
    # one float reached 3.5 GB); now one batch of chunks is planned at a
    # time, and 400,000 more chunks cost their output (1.6 MB).
    small, large = (tiny_chunks_read(tmp_path / f"{n}.zarr", n) for n in (40_000, 440_000))
    for out, n in [(small, 40_000), (large, 440_000)]:
        head, tail, fills = out["result"]
        assert head == [0, 1, 2, 3, 4, 7] and tail == [7, 0, -1, -2], out
        assert fills == n - 8, out
    # 400,000 more chunks once cost about 2.5 GB; 24 to 28 MiB more is seen,
    # loaded or not (batches of 32,768 chunks against one and a part, and
    # the allocator).
    assert large["peak_growth"] - small["peak_growth"] < 64 * MiB, (small, large)


def first_chunk_garbage_read(path: Path, n: int) -> dict:
    """A read, in a child, of an array of ``n`` one-float chunks whose first
    chunk is garbage and the rest unwritten."""
    sparse_array(path, (n,), (1,))
    (path / "c").mkdir()
    (path / "c" / "0").write_bytes(b"\xa5" * 16)
    code = f"""
        path = {str(path)!r}
        report(measure(lambda: zarrs_nvcomp.read_chunks_parallel(path, device="cpu")))
        """
    return run_child(code, address_space_extra=1 << 30)


def test_planning_ten_million_chunks_holds_no_entry_per_chunk(tmp_path):
    # The planner held an entry (about 40 B) per chunk along each dimension
    # before the first batch was read: a read of 10^7 one-float chunks grew
    # by 806 MiB. Now each batch finds the parts it meets; these reads fail
    # on their first chunk (garbage), their first batch planned and no other,
    # and cost the same (48 MiB seen) for 40,000 chunks as for 10^7.
    small, large = (first_chunk_garbage_read(tmp_path / f"{n}.zarr", n) for n in (40_000, 10**7))
    for out in (small, large):
        assert "DecodeError" in out["classes"] and "c/0" in out["result"], out
    assert large["peak_growth"] - small["peak_growth"] < 32 * MiB, (small, large)


def tiny_chunks_write(path: Path, n: int) -> dict:
    """A write, in a child, of all of an array of ``n`` one-float chunks of
    which the first five and last three differ from the fill value."""
    sparse_array(path, (n,), (1,))
    body = """
        data = np.full(n, 7, dtype=np.float32)
        data[:5] = np.arange(5)
        data[-3:] = -np.arange(3)
        def run():
            written = zarrs_nvcomp.write_chunks_parallel(path, data, device="cpu")
            a = zarrs_nvcomp.read_chunks_parallel(path, (slice(0, 6),), device="cpu")
            b = zarrs_nvcomp.read_chunks_parallel(path, (slice(n - 4, n),), device="cpu")
            return [list(written), a.tolist(), b.tolist()]
        """
    return tiny_chunks_child(path, n, body)


def test_many_tiny_chunks_are_written_in_bounded_memory(tmp_path):
    # The writer planned every chunk before its first wave, and a wave held
    # up to 2^20 of them (a plan of about 800 bytes a chunk); now it plans a
    # batch at a time, and a wave holds at most one batch of chunks.
    small, large = (tiny_chunks_write(tmp_path / f"{n}.zarr", n) for n in (40_000, 440_000))
    for out, n in [(small, 40_000), (large, 440_000)]:
        written, head, tail = out["result"]
        assert written == [8, n - 8], out
        assert head == [0, 1, 2, 3, 4, 7] and tail == [7, 0, -1, -2], out
    # 400,000 more chunks once cost about 2.5 GB; 39 MiB more is seen, 56
    # MiB with both cores of a 2-core machine busy (waves of 32,768 chunks
    # against one and a part, and the allocator; 91 MB in CI when the plan
    # still held 40 bytes a chunk).
    assert large["peak_growth"] - small["peak_growth"] < 96 * MiB, (small, large)


def test_small_selections_of_two_billion_chunks_are_fast(tmp_path):
    # A v2 array of 2 * 10^9 chunks: the grid is never walked whole.
    n = 2 * 10**9
    path = tmp_path / "a.zarr"
    path.mkdir()
    zarray = {
        "zarr_format": 2,
        "shape": [n],
        "chunks": [1],
        "dtype": "<f4",
        "compressor": {"id": "zstd", "level": 1},
        "fill_value": 7.0,
        "order": "C",
        "filters": None,
    }
    (path / ".zarray").write_text(json.dumps(zarray))
    out = run_child(
        f"""
        path = {str(path)!r}
        def run():
            array = zarrs_nvcomp.open_array(path)
            data = np.arange(4, dtype=np.float32)
            zarrs_nvcomp.write_chunks_parallel(path, data, (slice({n - 4}, {n}),), device="cpu")
            read = array.read((slice({n - 6}, {n}),), device="cpu", trusted_input=True)
            return read.tolist()
        report(measure(run))
        """,
        address_space_extra=1 << 30,
    )
    assert out["result"] == [7, 7, 0, 1, 2, 3], out
    assert out["seconds"] < 2, out
    assert out["peak_growth"] < 64 * MiB, out


def test_more_dimensions_than_numpy_are_refused_at_once(tmp_path):
    # 100,000 dimensions of size 1 took 34 s to read.
    path = tmp_path / "a.zarr"
    write_v3(path, [1] * 100_000, [1] * 100_000, ZSTD)
    start = time.perf_counter()
    with pytest.raises(InvalidArgumentError, match="100000 dimensions"):
        zarrs_nvcomp.open_array(str(path))
    assert time.perf_counter() - start < 3


def test_axes_longer_than_numpys_are_refused(tmp_path):
    # An axis of 2^63 elements opened, and reads and writes of it returned
    # or took selections that NumPy itself rejects ("Maximum allowed dimension exceeded").
    path = tmp_path / "a.zarr"
    write_v3(path, (0, 2**63), (1, 5), [BYTES])
    with pytest.raises(InvalidArgumentError, match="axis 1 has 9223372036854775808 elements"):
        zarrs_nvcomp.open_array(str(path))
    with pytest.raises(InvalidArgumentError, match="axis 1 has"):
        zarrs_nvcomp.read_chunks_parallel(str(path), device="cpu")
    with pytest.raises(InvalidArgumentError, match="sides must be from 0 to 9223372036854775807"):
        zarrs_nvcomp.create_array(str(tmp_path / "b.zarr"), shape=2**63, dtype="u2", chunks=3)
    assert not (tmp_path / "b.zarr").exists()
    longest = zarrs_nvcomp.create_array(
        str(tmp_path / "c.zarr"), shape=2**63 - 1, dtype="u2", chunks=3
    )
    longest[2**31] = 241
    assert longest.read(slice(2**31 - 1, 2**31 + 1), device="cpu").tolist() == [0, 241]


def test_a_chunk_past_the_address_space_limit_is_refused_before_allocating(tmp_path):
    # A chunk of 8 GiB under a 1 GiB address-space limit aborted the child
    # ("memory allocation of 8589934592 bytes failed"): the default limits
    # take the process's RLIMIT_AS where it is below the machine's memory.
    path = tmp_path / "a.zarr"
    write_v3(path, (6,), (2**31,), ZSTD, data_type="int32")
    out = run_child(
        f"""
        data = np.full(6, 96, dtype=np.int32)
        write = zarrs_nvcomp.write_chunks_parallel
        report(measure(lambda: write({str(path)!r}, data, device="cpu")))
        """,
        address_space_extra=1 << 30,
    )
    assert "OutOfMemoryError" in out["classes"], out
    assert str(2**33) in out["result"] and "c/0" in out["result"], out


def test_writes_refuse_chunks_beyond_memory_and_shards_of_too_many_inner_chunks(tmp_path):
    # A chunk of 2^60 bytes was allocated (an abort, so in a child); a shard
    # of 2^26 inner chunks reached 5.9 GB.
    huge = tmp_path / "huge.zarr"
    write_v3(huge, (3, 4), (2**20, 2**38), ZSTD)
    out = run_child(
        f"""
        data = np.zeros((3, 4), dtype=np.float32)
        write = zarrs_nvcomp.write_chunks_parallel
        report(measure(lambda: write({str(huge)!r}, data, device="cpu")))
        """,
        address_space_extra=1 << 30,
    )
    assert {"OutOfMemoryError", "MemoryError"} <= set(out["classes"]), out
    assert str(2**60) in out["result"], out
    sharded = tmp_path / "sharded.zarr"
    shard = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [1],
                "codecs": ZSTD,
                "index_codecs": [BYTES],
                "index_location": "end",
            },
        }
    ]
    write_v3(sharded, (2**26,), (2**26,), shard, data_type="uint8")
    with pytest.raises(InvalidArgumentError, match="inner chunks"):
        zarrs_nvcomp.write_chunks_parallel(
            str(sharded), np.ones(1, dtype=np.uint8), (slice(0, 1),), device="cpu"
        )
