"""Every codec chain zarr-python writes reads through the reader
(``device="cpu"``: the batched path or the zarrs pipeline) exactly as
zarr-python reads it, element by element, whole and in part."""

from __future__ import annotations

import json
import warnings

import numcodecs
import numpy as np
import pytest
import zarr
from chain_cases import CASES, write_case

from zarrs_nvcomp import DecodeError, open_array, read_chunks_parallel

PARTIAL = (slice(3, 30, 2), slice(5, 21))


def zarr_read(path, selection=...):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(zarr.open_array(str(path), mode="r")[...])[selection]


# A known gap: zarrs' transpose (v2 order F) over a filter registered here
# fails with an indexer error (an error, not wrong data).
KNOWN_GAPS = {"v2-order-F-delta"}


@pytest.mark.parametrize(
    "case_id",
    [
        pytest.param(
            c,
            marks=pytest.mark.xfail(
                strict=True, raises=DecodeError, reason="zarrs transpose over a numcodecs filter"
            ),
        )
        if c in KNOWN_GAPS
        else c
        for c in sorted(CASES)
    ],
)
def test_chain_reads_like_zarr_python(tmp_path, case_id):
    path = write_case(tmp_path, case_id)
    data, _ = CASES[case_id]
    want = zarr_read(path)
    np.testing.assert_array_equal(want, zarr_read(path))
    got = read_chunks_parallel(str(path), device="cpu")
    # The reader returns native byte order where zarr-python keeps the stored one.
    assert got.dtype == want.dtype.newbyteorder("=") and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    part = read_chunks_parallel(str(path), PARTIAL, device="cpu")
    np.testing.assert_array_equal(part, want[PARTIAL])
    if not any(lossy in case_id for lossy in ["quantize", "bitround"]):
        # The lossless chains (and the lossy ones on data they keep) return the data written.
        np.testing.assert_array_equal(got, data)


@pytest.mark.parametrize("case_id", ["v3-sharded-end-crc32c", "v3-blosc-lz4-shuffle-int16-0"])
def test_single_elements_and_strides(tmp_path, case_id):
    path = write_case(tmp_path, case_id)
    want = zarr_read(path)
    array = open_array(str(path))
    for selection in [(5, 7), (slice(None, None, 5), slice(2, None, 3)), (36, slice(None))]:
        np.testing.assert_array_equal(array.read(selection, device="cpu"), want[selection])


def test_unknown_codec_fails_at_open_naming_it(tmp_path):
    path = write_case(tmp_path, "v3-crc32c")
    meta_path = path / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["codecs"][-1] = {"name": "made_up_codec", "configuration": {}}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(Exception, match="made_up_codec"):
        open_array(str(path))


def test_v2_unknown_filter_fails_at_open_naming_it(tmp_path):
    path = write_case(tmp_path, "v2-delta")
    meta_path = path / ".zarray"
    meta = json.loads(meta_path.read_text())
    meta["filters"] = [{"id": "made_up_filter"}]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(Exception, match="made_up_filter"):
        open_array(str(path))


def test_fixedscaleoffset_u1_fails_at_open_naming_it(tmp_path):
    """A known gap: zarrs prefixes numcodecs' "|u1" with "<" and cannot open the
    array; the error names the codec instead of reading wrong data."""
    path = tmp_path / "fso.zarr"
    data = np.round(1000 + np.arange(40) / 10, 1)
    z = zarr.create_array(
        str(path),
        shape=data.shape,
        chunks=(8,),
        dtype=data.dtype,
        zarr_format=2,
        filters=[numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="u1")],
        compressors=None,
    )
    z[...] = data
    with pytest.raises(Exception, match="fixedscaleoffset"):
        open_array(str(path))
