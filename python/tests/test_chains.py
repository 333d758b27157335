"""Every codec chain zarr-python writes reads through the reader
(``device="cpu"``: the batched path or the zarrs pipeline) exactly as
zarr-python reads it, element by element, whole and in part; blosc arrays
report the batched path and read on the GPU as zarr-python reads them,
each chunk as its own header says."""

from __future__ import annotations

import json
import warnings

import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs as zc
from chain_cases import CASES, write_case
from conftest import cupy_or_skip

from zarrs_nvcomp import DecodeError, open_array, read_chunks_parallel

PARTIAL = (slice(3, 30, 2), slice(5, 21))


def zarr_read(path, selection=...):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(zarr.open_array(str(path), mode="r")[...])[selection]


# v2 order F over delta, which zarrs' pipeline fails on (an indexer error),
# is read by the batched path, which undoes both.
@pytest.mark.parametrize("case_id", sorted(CASES))
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


def _batched_blosc(case_id: str) -> bool:
    """Whether the reader decodes the blosc case in batches (all but blosclz,
    and shards that zarr-python compresses as a whole, which go through
    zarrs)."""
    if case_id in ("v3-numcodecs-blosc", "v3-big-endian-blosc", "v2-order-F-blosc"):
        return True
    return case_id.startswith(("v2-blosc-", "v3-blosc-")) and "-blosclz-" not in case_id


BLOSC_CASES = sorted(c for c in CASES if "blosc" in c)


@pytest.mark.parametrize("case_id", BLOSC_CASES)
def test_blosc_chains_report_their_path(tmp_path, case_id):
    array = open_array(str(write_case(tmp_path, case_id)))
    if _batched_blosc(case_id):
        assert array.batched_algorithm.startswith("blosc-"), array.fallback_reason
        cname = case_id.split("-")[2]
        if case_id.startswith(("v2-blosc-", "v3-blosc-")):
            assert array.batched_algorithm == f"blosc-{cname.replace('lz4hc', 'lz4')}"
    else:
        assert array.batched_algorithm is None
        if "blosclz" in case_id:
            assert "blosclz" in array.fallback_reason


def _mixed_compressors(path) -> np.ndarray:
    """An lz4 array (v3) whose chunks were written by arrays of other blosc
    compressors and shuffles: each chunk's header decides how it decodes.
    One chunk is incompressible (stored as is by blosc), one is missing."""
    rng = np.random.default_rng(12)
    data = np.round(rng.standard_normal((64, 40)).cumsum(axis=0), 1).astype("float32")
    data[32:48, 20:] = rng.standard_normal((16, 20)).astype("float32")
    data[48:, :20] = -1

    def create(p, cname, shuffle):
        return zarr.create_array(
            str(p),
            shape=data.shape,
            chunks=(16, 20),
            dtype=data.dtype,
            fill_value=-1,
            compressors=zc.BloscCodec(cname=cname, clevel=5, shuffle=shuffle, typesize=4),
        )

    create(path, "lz4", "shuffle")[...] = data
    others = {
        "c/0/0": ("zstd", "bitshuffle"),
        "c/1/0": ("blosclz", "shuffle"),
        "c/2/0": ("zlib", "noshuffle"),
        "c/0/1": ("lz4hc", "shuffle"),
    }
    for k, (chunk, (cname, shuffle)) in enumerate(others.items()):
        other = path.parent / f"other{k}.zarr"
        create(other, cname, shuffle)[...] = data
        (path / chunk).write_bytes((other / chunk).read_bytes())
    assert not (path / "c" / "3" / "0").exists(), "a chunk of fill values is not written"
    return data


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _host(array) -> np.ndarray:
    """A read's result in host memory."""
    return array if isinstance(array, np.ndarray) else cupy_or_skip().asnumpy(array)


@pytest.mark.parametrize("device", DEVICES)
def test_each_chunk_header_decides(tmp_path, device):
    path = tmp_path / "mixed.zarr"
    data = _mixed_compressors(path)
    np.testing.assert_array_equal(zarr_read(path), data)
    array = open_array(str(path))
    assert array.batched_algorithm == "blosc-lz4"
    np.testing.assert_array_equal(_host(array.read(device=device)), data)
    np.testing.assert_array_equal(_host(array.read(PARTIAL, device=device)), data[PARTIAL])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "case_id", ["v3-blosc-lz4-shuffle-int16-0", "v2-blosc-zstd-shuffle-float64-256"]
)
def test_corrupt_blosc_chunks_name_the_chunk(tmp_path, case_id, device):
    path = write_case(tmp_path, case_id)
    chunk = path / "c" / "1" / "0" if case_id.startswith("v3") else path / "1.0"
    key = "c/1/0" if case_id.startswith("v3") else "1.0"
    good = chunk.read_bytes()
    for bad in [b"\x09" + good[1:], good[:10], good[:12] + b"\xff\xff\xff\x7f" + good[16:]]:
        chunk.write_bytes(bad)
        with pytest.raises(DecodeError, match=key):
            read_chunks_parallel(str(path), device=device)


@pytest.mark.gpu
@pytest.mark.parametrize("case_id", [c for c in BLOSC_CASES if _batched_blosc(c)])
def test_gpu_reads_blosc_like_zarr_python(tmp_path, case_id):
    cp = cupy_or_skip()
    path = write_case(tmp_path, case_id)
    want = zarr_read(path)
    array = open_array(str(path))
    for selection in [..., PARTIAL, (5, slice(None)), (slice(None, None, 3), slice(1, None, 4))]:
        got = array.read(selection, device="cuda")
        assert isinstance(got, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(got), want[selection])
