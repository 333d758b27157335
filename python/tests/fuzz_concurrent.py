"""The entry-point fuzz's concurrent cases: writers and readers of one array
at once, on threads (the package releases the GIL while it reads and
writes).

A case creates an array whose fill value is 0, then writes distinct
positive values into boxes of it while a reader reads the whole array again
and again. As zarr asks, no two writers share a chunk (or shard): each
writes within whole rows of chunks of its own along the first axis. The
property: no call raises, not even a package error (a reader sees each
chunk or shard as it was before a write or after it, never a torn or
missing file); every element a read returns during the writes is the fill
value or the value of the write whose box holds it; and the read after the
writes returns exactly what was written.

Not covered: uncompressed shards, which zarrs reads (index, then ranges)
through separate requests of the store, so that a shard renamed between
them is read torn.
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
    if create["zarr_format"] == 3 and create["compressor"] is not None and draw(st.booleans()):
        create["shards"] = [c * draw(st.integers(1, 2)) for c in create["chunks"]]
    # Rows of whole chunks (shards) along the first axis, dealt out to writers.
    unit = create.get("shards", create["chunks"])[0]
    rows = -(-shape[0] // unit)
    owners = draw(st.lists(st.integers(0, 3), min_size=rows, max_size=rows))
    writes = []
    for writer in sorted(set(owners)):
        mine = [r for r, owner in enumerate(owners) if owner == writer]
        lo, hi = mine[0] * unit, min(shape[0], (mine[0] + 1) * unit)
        start = draw(st.integers(lo, hi - 1))
        box = [[start, draw(st.integers(start + 1, hi))]]
        for n in shape[1:]:
            a = draw(st.integers(0, n - 1))
            box.append([a, draw(st.integers(a + 1, n))])
        writes.append([box, len(writes) + 1])
    return {
        "kind": "concurrent",
        "create": create,
        "writes": writes,
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
    final = array.read(device="cpu")
    expected = np.zeros(create["shape"], dtype=final.dtype)
    for (_, value), mask in zip(writes, masks, strict=True):
        expected[mask] = value
    if not np.array_equal(final, expected):
        raise ConcurrencyViolation(f"after the writes, read {final!r}, wrote {expected!r}")
    return "ok"
