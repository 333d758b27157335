"""Every chain the chunk-parallel reader batches reads batched through
zarr's API with NvcompCodecPipeline: filters (delta, fixedscaleoffset,
bitround), transpose and v2 order F, big-endian bytes, blosc, sharded
arrays, plain chains; each read of a box is one call of the reader, and
gives what zarr's default pipeline gives. One classifier, the reader's,
decides which chains those are."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr
from chain_cases import CASES, write_case
from conftest import cupy_or_skip
from test_pipeline import assert_reads_on_the_gpu, in_store, read_both

from zarrs_nvcomp import read_chunks_parallel
from zarrs_nvcomp._zarrs_nvcomp import classify_chain

#: Chains the reader batches, by chain_cases id.
BATCHED = [
    "v2-blosc-zstd-shuffle-float64-256",
    "v3-blosc-lz4-bitshuffle-int16-0",
    "v3-transpose",
    "v2-order-F-delta",
    "v3-big-endian",
    "v3-big-endian-blosc",
    "v2-big-endian",
    "v3-delta",
    "v3-fixedscaleoffset",
    "v3-bitround",
    "v3-crc32c",
    "v3-numcodecs-zstd",
]

SELECTIONS = [(Ellipsis,), (slice(3, 35, 4), slice(2, None, 3)), (7, slice(None))]


def test_the_cases_are_the_chains_the_reader_batches(tmp_path):
    for case_id in BATCHED:
        path = write_case(tmp_path, case_id)
        name = "zarr.json" if case_id.startswith("v3") else ".zarray"
        verdict = classify_chain((path / name).read_text())
        assert verdict["batched"] is not None, (case_id, verdict["fallback_reason"])
        assert verdict["sharded"] == ("sharded" in case_id)


@pytest.mark.parametrize("case_id", BATCHED)
def test_batched_chains_read_in_one_reader_call_per_read(tmp_path, case_id, paths):
    data, _ = CASES[case_id]
    path = write_case(tmp_path, case_id)
    for selection in SELECTIONS:
        expected, got = read_both(path, selection)
        np.testing.assert_array_equal(got, expected)
        if "bitround" not in case_id:  # lossy: zarr's result is the reference
            np.testing.assert_array_equal(got, data[selection])
    # The same read as read_chunks_parallel's, once per read.
    assert [kind for kind, _ in paths] == ["reader"] * len(SELECTIONS)
    direct = read_chunks_parallel(str(path), SELECTIONS[1])
    np.testing.assert_array_equal(direct, zarr.open_array(path, mode="r")[SELECTIONS[1]])


@pytest.mark.parametrize(
    ("v2_filter", "dtype"),
    [
        (numcodecs.Delta(dtype="<i4"), "<i4"),
        (numcodecs.FixedScaleOffset(offset=0, scale=4, dtype="<f4", astype="<i4"), "<f4"),
    ],
    ids=["delta", "fixedscaleoffset"],
)
def test_v2_filters_with_zstd_read_through_the_reader(tmp_path, v2_filter, dtype, paths):
    # zarr's own pipeline hands GPU buffers to numcodecs' Delta under
    # enable_gpu() and fails; the reader undoes the filter itself.
    data = (np.arange(40 * 30).reshape(40, 30) * 3 % 20000 / 4).astype(dtype)
    z = zarr.create_array(
        tmp_path / "a",
        shape=data.shape,
        chunks=(16, 8),
        dtype=dtype,
        filters=[v2_filter],
        compressors=numcodecs.Zstd(level=1),
        zarr_format=2,
    )
    z[...] = data
    expected, got = read_both(tmp_path / "a", (slice(2, 39), slice(None)))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, data[2:39])
    assert [kind for kind, _ in paths] == ["reader"]


@pytest.mark.parametrize("case_id", ["v3-transpose", "v2-order-F-delta", "v3-delta"])
def test_chains_zarrs_store_api_fetches_read_as_zarr_reads_them(tmp_path, case_id, paths):
    # Out of the reader's reach: the stored-chunk path decodes them, the
    # delta undone in Rust and the transpose applied as a view.
    data, _ = CASES[case_id]
    source = in_store(write_case(tmp_path, case_id), "memory")
    expected, got = read_both(source, (Ellipsis,))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, data)
    kinds = {kind for kind, _ in paths}
    assert kinds == {"engine"}


@pytest.mark.gpu
@pytest.mark.parametrize("case_id", BATCHED)
def test_gpu_batched_chains_read_in_one_reader_call_per_read(tmp_path, case_id, paths):
    cp = cupy_or_skip()
    data, _ = CASES[case_id]
    path = write_case(tmp_path, case_id)
    if data.dtype.itemsize > 1 and not data.dtype.isnative:
        pytest.skip("CuPy holds no big-endian arrays: zarr cannot make the output")
    # zarr's own read on the CPU: the reference of the lossy chains too.
    assert_reads_on_the_gpu(cp, path, SELECTIONS, zarr.open_array(path, mode="r")[...])
    assert [kind for kind, _ in paths] == ["reader"] * len(SELECTIONS)
