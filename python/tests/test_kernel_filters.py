"""The element filter kernel's arithmetic (`src/cuda/kernels/filters.cu`),
compiled for the host and checked against NumPy: the byte swap of
big-endian elements, and numcodecs `delta`'s running sum (`numpy.cumsum`,
integers wrapping, floats added in order), over chunks at misaligned
addresses. The GPU tests run the PTX generated from the same source."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_kernel_sources import build

DELTA_NONE, DELTA_INT, DELTA_F32, DELTA_F64 = 0, 1, 2, 3


@pytest.fixture(scope="module")
def filter_elements(tmp_path_factory):
    fn = build(tmp_path_factory, "filters").filter_elements
    fn.argtypes = [ctypes.c_void_p, *[ctypes.c_uint64] * 4]

    def run(chunks: list[bytes], swap: int, delta: int, width: int) -> list[bytes]:
        # Each chunk 3 bytes past an 8-byte boundary.
        keep = [np.zeros(len(c) + 16, np.uint8) for c in chunks]
        ptrs = []
        for arr, c in zip(keep, chunks, strict=True):
            at = (-arr.ctypes.data) % 8 + 3
            arr[at : at + len(c)] = np.frombuffer(c, np.uint8)
            ptrs.append(arr.ctypes.data + at)
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
