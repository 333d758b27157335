"""The entry-point fuzz's concurrent cases: writers and readers of one array
at once, on threads (the package releases the GIL while it reads and
writes).

A case creates an array whose fill value is 0, then writes distinct
positive values into boxes of it (boxes may overlap and share chunks) while
a reader reads the whole array again and again. Property: no call raises,
not even a package error (a reader sees each chunk as it was before a write
or after it, never a torn or missing file), and every element that any read
returns, during the writes or after them, is the fill value or the value of
a write whose box holds it: a write that raced another's read-modify-write
of a shared chunk may be lost, as in zarr-python, but no value is made up.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

import zarrs_nvcomp


class ConcurrencyViolation(AssertionError):
    """A concurrent call raised, or read a value no write wrote."""


@st.composite
def _box(draw, shape: list[int]) -> list[list[int]]:
    """A non-empty box of ``shape``: ``[start, stop]`` per axis."""
    box = []
    for n in shape:
        start = draw(st.integers(0, n - 1))
        box.append([start, draw(st.integers(start + 1, n))])
    return box


@st.composite
def concurrent_cases(draw) -> dict:
    shape = draw(st.lists(st.integers(1, 48), min_size=1, max_size=2))
    create = {
        "shape": shape,
        "dtype": draw(st.sampled_from(["int16", "int32", "float32"])),
        "chunks": [draw(st.integers(1, n)) for n in shape],
        "compressor": draw(st.sampled_from(["zstd", "lz4", None, {"id": "zstd", "level": 3}])),
        "zarr_format": draw(st.sampled_from([3, 3, 2])),
        "fill_value": 0,
    }
    if create["zarr_format"] == 3 and draw(st.booleans()):
        create["shards"] = [c * draw(st.integers(1, 2)) for c in create["chunks"]]
    writes = draw(st.lists(_box(shape), min_size=2, max_size=4))
    return {
        "kind": "concurrent",
        "create": create,
        "writes": [[box, value + 1] for value, box in enumerate(writes)],
        "reads": draw(st.integers(1, 6)),
    }


def _allowed(shape: list[int], writes: list) -> list[np.ndarray]:
    """Per write, the mask of the elements its box holds."""
    masks = []
    for box, _ in writes:
        mask = np.zeros(shape, dtype=bool)
        mask[tuple(slice(a, b) for a, b in box)] = True
        masks.append(mask)
    return masks


def _check(result: np.ndarray, writes: list, masks: list[np.ndarray], what: str) -> None:
    ok = result == 0
    for (_, value), mask in zip(writes, masks, strict=True):
        ok |= mask & (result == value)
    if not ok.all():
        bad = np.argwhere(~ok)[:3].tolist()
        raise ConcurrencyViolation(f"{what} read values no write wrote at {bad}: {result!r}")


def run_concurrent(case: dict, tmp: Path) -> str:
    create = case["create"]
    try:
        array = zarrs_nvcomp.create_array(str(tmp / "c.zarr"), **create)
    except zarrs_nvcomp.ZarrsNvcompError as e:
        return type(e).__name__
    writes, masks = case["writes"], _allowed(create["shape"], case["writes"])

    def write(box, value) -> None:
        array[tuple(slice(a, b) for a, b in box)] = value

    def read_again() -> list[np.ndarray]:
        return [array.read(device="cpu") for _ in range(case["reads"])]

    with ThreadPoolExecutor(max_workers=len(writes) + 1) as pool:
        reading = pool.submit(read_again)
        writing = [pool.submit(write, box, value) for box, value in writes]
        for future in [*writing, reading]:
            error = future.exception()
            if error is not None:
                raise ConcurrencyViolation(
                    f"{type(error).__name__} during concurrent writes: {error}"
                ) from error
    for i, result in enumerate(reading.result()):
        _check(result, writes, masks, f"read {i} during the writes")
    _check(array.read(device="cpu"), writes, masks, "the read after the writes")
    return "ok"
