"""Creators racing for one new array: exactly one ``create_array`` succeeds,
every other raises ``ContainsArrayError``, and the winner's metadata is the
one stored (in 2 of 25 trials of six processes, two callers succeeded, or a
refused caller's metadata replaced the winner's)."""

from __future__ import annotations

import json
import multiprocessing

import pytest

CREATORS = 6
TRIALS = 25


def _creator(index: int, paths: list[str], zarr_format: int, barrier, results) -> None:
    import zarrs_nvcomp

    for trial, path in enumerate(paths):
        barrier.wait()
        try:
            # Each creator's own fill value tells whose metadata was stored.
            zarrs_nvcomp.create_array(
                path,
                shape=(4,),
                chunks=(2,),
                dtype="int32",
                fill_value=index,
                zarr_format=zarr_format,
            )
            results.put((trial, index, "created"))
        except zarrs_nvcomp.ContainsArrayError:
            results.put((trial, index, "exists"))
        except Exception as e:  # reported, and the test fails on it
            results.put((trial, index, f"{type(e).__name__}: {e}"))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_exactly_one_of_racing_creators_wins(tmp_path, zarr_format):
    paths = [str(tmp_path / f"t{trial}.zarr") for trial in range(TRIALS)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(CREATORS)
    results = context.Queue()
    workers = [
        context.Process(target=_creator, args=(i, paths, zarr_format, barrier, results))
        for i in range(CREATORS)
    ]
    for worker in workers:
        worker.start()
    outcomes: dict[int, dict[int, str]] = {}
    for _ in range(CREATORS * TRIALS):
        trial, index, outcome = results.get(timeout=120)
        outcomes.setdefault(trial, {})[index] = outcome
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    for trial, by_creator in sorted(outcomes.items()):
        winners = [i for i, outcome in by_creator.items() if outcome == "created"]
        others = {outcome for i, outcome in by_creator.items() if i not in winners}
        assert len(winners) == 1, (trial, by_creator)
        assert others == {"exists"}, (trial, by_creator)
        document = "zarr.json" if zarr_format == 3 else ".zarray"
        stored = json.loads((tmp_path / f"t{trial}.zarr" / document).read_text())
        assert stored["fill_value"] == winners[0], (trial, by_creator, stored["fill_value"])
