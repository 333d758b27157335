"""Issue 29, "never panic": a property test of the entry points (open_array,
create_array, reads, writes, the codec) over arbitrary metadata, options,
selections and bytes (cases and property in ``fuzz_cases``). Every call
succeeds with consistent results or raises a ``ZarrsNvcompError``; a panic,
a built-in error, a hang or an allocation beyond the output fails.

CI runs a few hundred cases; ``ZARRS_NVCOMP_FUZZ_EXAMPLES`` sets how many per
test, and ``fuzz/entry_points.py`` runs long campaigns in guarded children.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fuzz_cases import codec_cases, concurrent_cases, create_cases, read_cases, run
from hypothesis import HealthCheck, given, settings

FUZZ = settings(
    max_examples=int(os.environ.get("ZARRS_NVCOMP_FUZZ_EXAMPLES", "150")),
    deadline=None,
    database=None,
    derandomize="ZARRS_NVCOMP_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=list(HealthCheck),
)


def check(case: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run(case, Path(tmp))


@FUZZ
@given(read_cases())
def test_open_and_read_take_any_metadata_options_and_selection(case):
    check(case)


@FUZZ
@given(create_cases())
def test_create_and_write_take_any_arguments_and_read_back_what_they_wrote(case):
    check(case)


@FUZZ
@given(codec_cases())
def test_the_codec_takes_any_configuration_and_bytes(case):
    check(case)


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 40))
@given(concurrent_cases())
def test_concurrent_writers_and_readers_of_one_array_see_only_written_values(case):
    check(case)
