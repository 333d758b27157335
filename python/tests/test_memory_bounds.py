"""Memory and size bounds: decoding on the CPU costs a small multiple of its
output whatever the input, reads refuse outputs that cannot be allocated
(MemoryError naming the size) instead of killing the interpreter, strided
selections read only the chunks their points touch, and ``out=`` buffers
may not overlap.

Cases that could exhaust memory run in a child process whose address space
is limited (``RLIMIT_AS``), so a regression fails the test instead of
killing pytest; peak memory is the child's ``VmHWM``, reset before the
measured call."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import cuda_codec, cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp import DecodeError, NvCompBatchCodec, read_chunks_parallel

MiB = 1 << 20

# Runs in the child before the case: `measure(fn)` calls `fn` and returns
# its result with the growth of the peak resident memory it caused.
PRELUDE = """
import json, resource, sys, time
import numpy as np
import zarrs_nvcomp

def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)

def limit_address_space(extra):
    size = _status("VmSize") + extra
    resource.setrlimit(resource.RLIMIT_AS, (size, resource.getrlimit(resource.RLIMIT_AS)[1]))

def measure(fn):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size
    base = _status("VmRSS")
    start = time.perf_counter()
    try:
        result = fn()
    except Exception as e:
        result = f"{type(e).__name__}: {e}"
        # The classes it is an instance of: the package's MemoryError is a subclass.
        result_classes = [c.__name__ for c in type(e).__mro__]
    else:
        result_classes = []
    return {"result": result, "classes": result_classes,
            "peak_growth": _status("VmHWM") - base, "seconds": time.perf_counter() - start}

def report(value):
    print("RESULT " + json.dumps(value))
"""


def run_child(body: str, *, address_space_extra: int = 6 << 30, timeout: float = 300) -> dict:
    """Runs ``body`` after the prelude, its address space limited to what it
    holds when it starts plus ``address_space_extra``; returns what it
    reported. A child that dies (abort, OOM) fails the test."""
    code = PRELUDE + f"\nlimit_address_space({address_space_extra})\n" + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, (
        f"the child died (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


# --- CPU codec memory -------------------------------------------------------


def test_truncated_bare_gdeflate_stream_costs_little():
    out = run_child(
        """
        codec = zarrs_nvcomp.NvCompBatchCodec("gdeflate", {"has_header": False}, device="cpu")
        page = np.random.default_rng(0).integers(0, 48, 64 * 1024, dtype=np.uint8).tobytes()
        stream = codec.encode(page)[:40_000]  # of about 49 KB
        report(measure(lambda: codec.decode_batch([stream] * 2)))
        """
    )
    assert out["result"].startswith("DecodeError"), out
    # Was about 1 GiB per decoding thread, and 4.6 s.
    assert out["peak_growth"] < 64 * MiB, out
    assert out["seconds"] < 2, out


def test_many_small_bare_gdeflate_encodes_cost_little():
    out = run_child(
        """
        codec = zarrs_nvcomp.NvCompBatchCodec("gdeflate", {"has_header": False}, device="cpu")
        items = [i.to_bytes(8, "little") for i in range(50_000)]
        def encode():
            encoded = codec.encode_batch(items)
            assert codec.decode_batch(encoded[:100])[7].tobytes() == items[7]
            return len(encoded)
        report(measure(encode))
        """
    )
    assert out["result"] == 50_000, out
    # Was 4.2 GiB: every result kept libdeflate's bound (about 84 KB) as capacity.
    assert out["peak_growth"] < 256 * MiB, out


def test_many_tiny_raw_deflate_decodes_cost_little():
    out = run_child(
        """
        codec = zarrs_nvcomp.NvCompBatchCodec("deflate", device="cpu")
        items = [b"tiny item %06d" % i for i in range(100_000)]
        encoded = codec.encode_batch(items)
        def decode():
            decoded = codec.decode_batch(encoded)
            assert decoded[12345].tobytes() == items[12345]
            return len(decoded)
        report(measure(decode))
        """
    )
    assert out["result"] == 100_000, out
    # Was 1.4 GiB: a 64 KiB buffer kept per item.
    assert out["peak_growth"] < 256 * MiB, out


# A Zstandard frame without a content size, of RLE blocks of 128 KiB and a
# final raw block (Python has no encoder that leaves the size out).
ZSTD_FRAME = """
def rle_frame(blocks, tail=b""):
    frame = bytearray(b"\\x28\\xb5\\x2f\\xfd\\x00\\x38")  # no content size, 128 KiB window
    for i in range(blocks):
        last = int(i + 1 == blocks and not tail)
        frame += ((128 * 1024) << 3 | 1 << 1 | last).to_bytes(3, "little") + b"z"
    if tail:
        frame += (len(tail) << 3 | 1).to_bytes(3, "little") + tail
    return bytes(frame)
"""


def test_unsized_zstd_frame_decodes_within_a_small_multiple_of_its_output():
    out = run_child(
        ZSTD_FRAME
        + textwrap.dedent(
            """
        codec = zarrs_nvcomp.NvCompBatchCodec("zstd", device="cpu")
        tail = bytes(range(256)) * 48
        frame = rle_frame(800, tail)
        size = 800 * 128 * 1024 + len(tail)
        def decode():
            decoded = codec.decode(frame)
            assert decoded.nbytes == size and decoded[-len(tail):].tobytes() == tail
            return size
        report(measure(decode))
        """
        )
    )
    size = out["result"]
    assert isinstance(size, int), out
    # Was 3.3 times the output.
    assert out["peak_growth"] < 1.5 * size, out


def test_unsized_zstd_frame_over_the_limit_is_refused_before_decoding():
    out = run_child(
        ZSTD_FRAME
        + textwrap.dedent(
            """
        limit = 1 << 30
        codec = zarrs_nvcomp.NvCompBatchCodec("zstd", device="cpu", max_decoded_size=limit)
        frame = rle_frame(8 * 1024 + 100)  # 33 KB that decode to 1 GiB + 12.5 MiB
        report(measure(lambda: codec.decode(frame)))
        """
        )
    )
    assert out["result"].startswith("DecodeError"), out
    assert "decodes to more than the limit" in out["result"], out
    # Was 5.8 GiB before the error.
    assert out["peak_growth"] < 64 * MiB, out


# --- reader: sizes and strided selections -----------------------------------


def zarr_read(z, selection):
    """zarr-python's result, negative steps included (zarr reads only positive ones)."""
    ascending, flips = [], []
    for axis, sel in enumerate(selection):
        if isinstance(sel, slice) and (sel.step or 1) < 0:
            r = range(*sel.indices(z.shape[axis]))
            ascending.append(slice(r[-1], r[0] + 1, -r.step) if len(r) else slice(0, 0))
            flips.append(len([s for s in selection[:axis] if isinstance(s, slice)]))
        else:
            ascending.append(sel)
    result = np.asarray(z[tuple(ascending)])
    for axis in flips:
        result = np.flip(result, axis)
    return result


def sparse_array(path: Path, shape, chunks, dtype="float32", fill_value=7, **create):
    """A new array at ``path`` of which nothing is written yet."""
    return zarr.create_array(
        str(path), shape=shape, chunks=chunks, dtype=dtype, fill_value=fill_value, **create
    )


def test_whole_read_larger_than_memory_raises_memory_error(tmp_path):
    sparse_array(tmp_path / "a.zarr", (10**13, 120), (10**6, 120))
    out = run_child(
        f"""
        path = {str(tmp_path / "a.zarr")!r}
        report(measure(lambda: zarrs_nvcomp.read_chunks_parallel(path, device="cpu")))
        """
    )
    message = out["result"]
    assert "MemoryError" in out["classes"], out
    assert str(10**13 * 120 * 4) in message and "[10000000000000, 120]" in message, message
    assert out["peak_growth"] < 64 * MiB, out


def test_selection_the_allocator_refuses_raises_memory_error(tmp_path):
    # 4 GiB of output, within the machine's memory but not the child's 1 GiB.
    sparse_array(tmp_path / "a.zarr", (65536, 16384), (4096, 4096))
    out = run_child(
        f"""
        path = {str(tmp_path / "a.zarr")!r}
        first = measure(lambda: zarrs_nvcomp.read_chunks_parallel(path, device="cpu"))
        # The interpreter lives on and reads what fits.
        small = zarrs_nvcomp.read_chunks_parallel(path, (slice(0, 10), slice(0, 10)), device="cpu")
        report([first, float(small.sum())])
        """,
        address_space_extra=1 << 30,
    )
    first, total = out
    assert "MemoryError" in first["classes"], first
    assert str(65536 * 16384 * 4) in first["result"], first
    assert total == 700.0


BIG = (10**6, 10**6)
STRIDED_SELECTIONS = [
    (slice(None, None, 500_000),) * 2,
    (slice(3, None, 499_999), slice(None, None, -500_000)),
    (slice(0, 2000, 7), slice(500_000, 501_000, 3)),
    (999_999, slice(None, None, 250_000)),
    (slice(None, None, 100_000), 500_123),
]


@pytest.mark.parametrize("written", [False, True], ids=["sparse", "some-chunks"])
def test_strided_selection_of_a_huge_array_reads_only_touched_chunks(tmp_path, written):
    z = sparse_array(tmp_path / "a.zarr", BIG, (1000, 1000))
    if written:
        rng = np.random.default_rng(1)
        for r, c in [(0, 0), (500_000, 500_000), (999_000, 0), (500_000, 501_000)]:
            z[r : r + 1000, c : c + 1000] = rng.random((1000, 1000), dtype=np.float32)
    out = run_child(
        f"""
        path = {str(tmp_path / "a.zarr")!r}
        results = []
        for selection in {STRIDED_SELECTIONS!r}:
            start = time.perf_counter()
            got = zarrs_nvcomp.read_chunks_parallel(path, selection, device="cpu")
            results.append([got.tolist(), list(got.shape), time.perf_counter() - start])
        report(results)
        """,
        address_space_extra=2 << 30,
    )
    for selection, (got, shape, elapsed) in zip(STRIDED_SELECTIONS, out, strict=True):
        expected = zarr_read(z, selection)
        assert tuple(shape) == expected.shape, selection
        np.testing.assert_array_equal(np.array(got, dtype=np.float32).reshape(shape), expected)
        # Planning is per touched chunk: the whole grid has 10^6 chunks.
        assert elapsed < 0.5, (selection, elapsed)


def test_strided_selection_does_not_allocate_the_bounding_box(tmp_path):
    sparse_array(tmp_path / "a.zarr", BIG, (1000, 1000))
    out = run_child(
        f"""
        path = {str(tmp_path / "a.zarr")!r}
        report(measure(lambda: zarrs_nvcomp.read_chunks_parallel(
            path, (slice(None, None, 500_000),) * 2, device="cpu").tolist()))
        """,
        address_space_extra=2 << 30,
    )
    assert out["result"] == [[7.0, 7.0], [7.0, 7.0]], out
    assert out["peak_growth"] < 64 * MiB, out


def test_strided_selection_through_the_zarrs_pipeline(tmp_path):
    # Uncompressed chunks take the zarrs pipeline: chunk by chunk as well.
    z = sparse_array(
        tmp_path / "a.zarr", (3000, 3000), (100, 100), "int32", fill_value=-1, compressors=None
    )
    z[:1500, 1000:2500] = np.arange(1500 * 1500, dtype=np.int32).reshape(1500, 1500)
    array = zarrs_nvcomp.open_array(str(tmp_path / "a.zarr"))
    assert array.batched_algorithm is None
    for selection in [
        (slice(None, None, 700), slice(None, None, 450)),
        (slice(5, 2900, 13), slice(2999, 0, -17)),
        (slice(1, 1001), slice(1000, 1200)),
    ]:
        np.testing.assert_array_equal(array.read(selection, device="cpu"), zarr_read(z, selection))


# --- the smaller ones -------------------------------------------------------


def test_fallback_errors_name_the_chunk_key(tmp_path):
    z = sparse_array(
        tmp_path / "a.zarr", (40, 40), (10, 10), "int32", fill_value=0, compressors=None
    )
    z[:] = 1
    chunk = tmp_path / "a.zarr" / "c" / "2" / "1"
    chunk.write_bytes(chunk.read_bytes()[:17])  # truncated
    with pytest.raises(DecodeError, match="c/2/1"):
        read_chunks_parallel(str(tmp_path / "a.zarr"), device="cpu")


def test_missing_chunks_are_filled_in_place(tmp_path):
    # 256 MiB in one missing chunk: its fill was built in a second buffer of its size.
    sparse_array(tmp_path / "a.zarr", (64 * MiB,), (64 * MiB,))
    out = run_child(
        f"""
        path = {str(tmp_path / "a.zarr")!r}
        def read():
            a = zarrs_nvcomp.read_chunks_parallel(path, device="cpu")
            return [a.nbytes, bool((a == 7).all())]
        report(measure(read))
        """
    )
    nbytes, all_fill = out["result"]
    assert all_fill, out
    # Was a second output-sized buffer (2 times the output).
    assert out["peak_growth"] < 1.3 * nbytes, out


def reject_overlapping_outputs(codec, encoded, xp):
    """Checks that ``codec`` rejects outputs that are one buffer twice or two
    overlapping views of one (``xp``: NumPy or CuPy, whose buffers they are);
    returns a buffer of 200 bytes for the two decoded items."""
    o = xp.zeros(100, dtype=xp.uint8)
    with pytest.raises(ValueError, match="output buffer 1 overlaps output buffer 0"):
        codec.decode_batch(encoded, out=[o, o])
    buf = xp.zeros(200, dtype=xp.uint8)
    with pytest.raises(ValueError, match="overlaps"):
        codec.decode_batch(encoded, out=[buf[:100], buf[50:150]])
    return buf


def test_overlapping_host_outputs_are_rejected():
    codec = NvCompBatchCodec("lz4", device="cpu")
    data = [np.arange(100, dtype=np.uint8).tobytes(), bytes(100)]
    encoded = codec.encode_batch(data)
    buf = reject_overlapping_outputs(codec, encoded, np)
    inputs = np.frombuffer(b"".join(encoded) + bytes(100), dtype=np.uint8).copy()
    with pytest.raises(ValueError, match=r"buffer 0 overlaps (input|output) buffer 0"):
        codec.decode_batch([inputs[: len(encoded[0])]], out=[inputs[:100]])
    # Adjacent views of one buffer are distinct memory.
    result = codec.decode_batch(encoded, out=[buf[:100], buf[100:]])
    assert buf[:100].tobytes() == data[0] and buf[100:].tobytes() == data[1]
    assert result[0] is not None


@pytest.mark.gpu
def test_overlapping_device_outputs_are_rejected():
    cp, codec = cuda_codec("lz4")
    data = [np.arange(100, dtype=np.uint8).tobytes(), bytes(100)]
    encoded = [cp.asarray(np.frombuffer(e, dtype=np.uint8)) for e in codec.encode_batch(data)]
    buf = reject_overlapping_outputs(codec, encoded, cp)
    codec.decode_batch(encoded, out=[buf[:100], buf[100:]])
    assert buf[:100].get().tobytes() == data[0]


@pytest.mark.gpu
def test_device_read_larger_than_the_gpu_raises_memory_error(tmp_path):
    cupy_or_skip()
    sparse_array(tmp_path / "a.zarr", (10**13, 120), (10**6, 120))
    with pytest.raises(MemoryError, match=str(10**13 * 120 * 4)):
        read_chunks_parallel(str(tmp_path / "a.zarr"), device="cuda")
