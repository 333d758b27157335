"""The element filter kernels' arithmetic (`src/cuda/kernels/filters.cu`),
compiled for the host and checked against NumPy and numcodecs: the byte
swap of big-endian elements, numcodecs `delta`'s running sum
(`numpy.cumsum`, integers wrapping, floats added in order), and numcodecs
`fixedscaleoffset`'s integers widened to floats, over chunks at misaligned
addresses. The GPU tests run the PTX generated from the same source."""

from __future__ import annotations

import ctypes

import numcodecs
import numpy as np
import pytest
from test_kernel_sources import build

DELTA_NONE, DELTA_INT, DELTA_F32, DELTA_F64 = 0, 1, 2, 3


def misaligned(chunks: list[bytes]) -> tuple[list[np.ndarray], list[int]]:
    """`chunks` copied 3 bytes past an 8-byte boundary each: the buffers
    (to keep alive) and the chunks' addresses."""
    keep = [np.zeros(len(c) + 16, np.uint8) for c in chunks]
    ptrs = []
    for arr, c in zip(keep, chunks, strict=True):
        at = (-arr.ctypes.data) % 8 + 3
        arr[at : at + len(c)] = np.frombuffer(c, np.uint8)
        ptrs.append(arr.ctypes.data + at)
    return keep, ptrs


@pytest.fixture(scope="module")
def filter_elements(tmp_path_factory):
    fn = build(tmp_path_factory, "filters").filter_elements
    fn.argtypes = [ctypes.c_void_p, *[ctypes.c_uint64] * 4]

    def run(chunks: list[bytes], swap: int, delta: int, width: int) -> list[bytes]:
        _keep, ptrs = misaligned(chunks)
        table = np.array(ptrs + [len(c) for c in chunks], np.uint64)
        fn(table.ctypes.data, len(chunks), swap, delta, width)
        return [ctypes.string_at(p, len(c)) for p, c in zip(ptrs, chunks, strict=True)]

    return run


def test_byte_swaps_match_numpy(filter_elements):
    rng = np.random.default_rng(1)
    for dtype in [">u2", ">i4", ">u8", ">c8"]:
        dtype = np.dtype(dtype)
        arrays = [
            rng.integers(0, 256, n * dtype.itemsize, np.uint8).view(dtype) for n in [0, 1, 999]
        ]
        word = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
        got = filter_elements([a.tobytes() for a in arrays], word, DELTA_NONE, word)
        for a, g in zip(arrays, got, strict=True):
            assert g == a.astype(dtype.newbyteorder("<")).tobytes(), dtype
    # A trailing part of a word is left as it is.
    (got,) = filter_elements([bytes(range(7))], 4, DELTA_NONE, 4)
    assert got == bytes([3, 2, 1, 0, 4, 5, 6])


@pytest.mark.parametrize("dtype", ["i1", "u2", "i4", "i8", "u8", "f4", "f8"])
@pytest.mark.parametrize("order", ["<", ">"])
def test_running_sums_match_numpy_cumsum(filter_elements, dtype, order):
    stored = np.dtype(order + dtype)
    native = stored.newbyteorder("<")
    rng = np.random.default_rng(2)
    if native.kind == "f":
        values = [rng.standard_normal(n).astype(native) * 1e3 for n in [5000, 1, 0]]
        values[0][0] = -0.0
        values[0][1:4] = [1e30, 1.0, -1e30]
        # Random bits: NaNs of many payloads, signs and infinities, whose
        # sums keep x86's NaN (the kernel spells the rule out for the GPU).
        values.append(rng.integers(0, 256, 3000 * native.itemsize, np.uint8).view(native))
        values.append(np.array([np.inf, -np.inf, 1.0], native))
        code = DELTA_F32 if native.itemsize == 4 else DELTA_F64
    else:
        info = np.iinfo(native)
        values = [rng.integers(info.min, info.max, n, native, endpoint=True) for n in [5000, 1, 0]]
        code = DELTA_INT
    swap = native.itemsize if order == ">" and native.itemsize > 1 else 1
    chunks = [v.astype(stored).tobytes() for v in values]
    got = filter_elements(chunks, swap, code, native.itemsize)
    for v, g in zip(values, got, strict=True):
        with np.errstate(invalid="ignore", over="ignore"):
            want = np.cumsum(v, dtype=native)
        # Bit for bit: signed zeros, roundings and wrapped integers alike.
        assert g == want.tobytes()


@pytest.fixture(scope="module")
def scale_offset(tmp_path_factory):
    fn = build(tmp_path_factory, "filters").scale_offset
    fn.argtypes = [ctypes.c_void_p, *[ctypes.c_uint64] * 6]

    def run(chunks: list[bytes], astype: np.dtype, wide: bool, scale, offset) -> list[bytes]:
        width = 8 if wide else 4
        n = [len(c) // astype.itemsize for c in chunks]
        _src_keep, src = misaligned(chunks)
        _dst_keep, dst = misaligned([bytes(k * width) for k in n])
        table = np.array(src + dst + n, np.uint64)
        bits = np.array([float(scale), float(offset)], np.float64).view(np.uint64)
        signed = astype.kind == "i"
        fn(
            table.ctypes.data,
            len(chunks),
            astype.itemsize,
            signed,
            wide,
            int(bits[0]),
            int(bits[1]),
        )
        return [ctypes.string_at(p, k * width) for p, k in zip(dst, n, strict=True)]

    return run


@pytest.mark.parametrize("astype", ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8"])
@pytest.mark.parametrize("dtype", ["<f4", "<f8"])
@pytest.mark.parametrize(("scale", "offset"), [(10, 1000.1), (0.25, -3), (3.5, 0.1), (1e-3, 7)])
def test_fixedscaleoffset_matches_numcodecs(scale_offset, astype, dtype, scale, offset):
    astype = np.dtype("<" + astype)
    info = np.iinfo(astype)
    rng = np.random.default_rng(3)
    values = [rng.integers(info.min, info.max, n, astype, endpoint=True) for n in [4099, 1, 0]]
    values[0][:2] = [info.min, info.max]
    codec = numcodecs.FixedScaleOffset(offset=offset, scale=scale, dtype=dtype, astype=astype.str)
    got = scale_offset([v.tobytes() for v in values], astype, dtype == "<f8", scale, offset)
    for v, g in zip(values, got, strict=True):
        # Bit for bit: NumPy's float64 arithmetic, rounded once to float32.
        assert g == np.asarray(codec.decode(v.tobytes())).tobytes()
