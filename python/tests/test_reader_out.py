"""Reads into the caller's array (``out=``): equal to the reader's own
result, every element written (missing chunks as the fill value over what
``out`` held), the array returned; bad ``out`` arrays raise ValueError naming
what is wrong before anything is read; on the GPU into CuPy arrays, sharded
arrays too; the codec pipeline reads into zarr's own output buffer."""

from __future__ import annotations

import re

import numpy as np
import pytest
import zarr
import zarr.codecs as zc
from conftest import cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp import open_array, read_chunks_parallel

PIPELINE = {"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}

SELECTIONS = [
    ...,
    (slice(3, 27), slice(5, 33)),
    (slice(1, None, 4), slice(2, None, 3)),
    (12, slice(None)),
    (slice(None, None, -2), 7),
]


@pytest.fixture
def outs(monkeypatch) -> list:
    """The ``out`` argument of every ``Array.read`` and ``Array.read_async``
    call (None where absent)."""
    seen = []
    read, read_async = zarrs_nvcomp.reader.Array.read, zarrs_nvcomp.reader.Array.read_async

    def recording(self, *args, **kwargs):
        seen.append(kwargs.get("out"))
        return read(self, *args, **kwargs)

    async def recording_async(self, *args, **kwargs):
        seen.append(kwargs.get("out"))
        return await read_async(self, *args, **kwargs)

    monkeypatch.setattr(zarrs_nvcomp.reader.Array, "read", recording)
    monkeypatch.setattr(zarrs_nvcomp.reader.Array, "read_async", recording_async)
    return seen


def write_partial(path, *, fill_value, shards=None, compressors=None) -> np.ndarray:
    """A (30, 40) float32 array with chunks (7, 9) of which only some are
    written (the others missing: the fill value); what it holds."""
    z = zarr.create_array(
        str(path),
        shape=(30, 40),
        chunks=(7, 9) if shards is None else (4, 5),
        shards=shards,
        dtype="float32",
        fill_value=fill_value,
        compressors=compressors or zc.ZstdCodec(level=1),
    )
    data = np.full((30, 40), fill_value, "float32")
    block = np.arange(9 * 11, dtype="float32").reshape(9, 11) + 0.5
    z[3:12, 20:31] = block
    data[3:12, 20:31] = block
    return data


def garbage(shape, dtype) -> np.ndarray:
    """An array of the shape and dtype whose every byte is 0xA5."""
    out = np.empty(shape, dtype)
    out.view(np.uint8)[...] = 0xA5
    return out


@pytest.mark.parametrize("fill_value", [0, -2.5])
@pytest.mark.parametrize("selection", SELECTIONS, ids=repr)
def test_reads_into_numpy_arrays_over_garbage(tmp_path, selection, fill_value):
    data = write_partial(tmp_path / "a.zarr", fill_value=fill_value)
    array = open_array(str(tmp_path / "a.zarr"))
    want = data[selection]
    out = garbage(want.shape, want.dtype)
    got = array.read(selection, device="cpu", out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out, array.read(selection, device="cpu"))


@pytest.mark.parametrize("fill_value", [0, 3])
def test_sharded_and_fallback_chains_read_into_numpy_arrays(tmp_path, fill_value):
    sharded = write_partial(tmp_path / "s.zarr", fill_value=fill_value, shards=(8, 10))
    blosc = write_partial(tmp_path / "b.zarr", fill_value=fill_value, compressors=zc.BloscCodec())
    # blosclz has no batched decoder: the zarrs pipeline reads it.
    blosclz = write_partial(
        tmp_path / "l.zarr", fill_value=fill_value, compressors=zc.BloscCodec(cname="blosclz")
    )
    assert open_array(str(tmp_path / "s.zarr")).batched_algorithm == "zstd"
    assert open_array(str(tmp_path / "b.zarr")).batched_algorithm == "blosc-zstd"
    assert open_array(str(tmp_path / "l.zarr")).batched_algorithm is None
    for name, data in (("s.zarr", sharded), ("b.zarr", blosc), ("l.zarr", blosclz)):
        for selection in SELECTIONS:
            want = data[selection]
            out = garbage(want.shape, want.dtype)
            path = str(tmp_path / name)
            assert read_chunks_parallel(path, selection, device="cpu", out=out) is out
            np.testing.assert_array_equal(out, want, err_msg=f"{name} {selection}")


def test_device_none_with_a_numpy_out_reads_on_the_cpu(tmp_path):
    data = write_partial(tmp_path / "a.zarr", fill_value=1)
    out = garbage(data.shape, data.dtype)
    assert open_array(str(tmp_path / "a.zarr")).read(out=out) is out
    np.testing.assert_array_equal(out, data)


def test_empty_selections_return_out_untouched(tmp_path):
    write_partial(tmp_path / "a.zarr", fill_value=1)
    out = np.empty((0, 40), "float32")
    assert open_array(str(tmp_path / "a.zarr")).read((slice(5, 5),), out=out) is out


@pytest.mark.parametrize(
    ("make", "device", "message"),
    [
        (lambda: np.empty((30, 41), "float32"), "cpu", "has shape (30, 41)"),
        (lambda: np.empty((40, 30), "float32"), "cpu", "the selection has shape (30, 40)"),
        (lambda: np.empty((30, 40), "float64"), "cpu", "has dtype float64"),
        (lambda: np.empty((30, 40), ">f4"), "cpu", "has dtype >f4"),
        (lambda: np.empty((40, 30), "float32").T, "cpu", "is not C-contiguous"),
        (lambda: np.empty((30, 80), "float32")[:, ::2], "cpu", "is not C-contiguous"),
        (lambda: _read_only((30, 40)), "cpu", "is read-only"),
        (lambda: np.empty((30, 40), "float32"), "cuda:0", "needs a device array"),
        (lambda: [[0.0] * 40] * 30, "cpu", "must be a NumPy array"),
    ],
)
def test_bad_outs_raise_value_error_before_reading(tmp_path, make, device, message):
    write_partial(tmp_path / "a.zarr", fill_value=1)
    array = open_array(str(tmp_path / "a.zarr"))
    progress = []
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        array.read(device=device, out=make(), progress=lambda *a: progress.append(a))
    assert isinstance(info.value, zarrs_nvcomp.InvalidArgumentError)
    assert progress == []


def _read_only(shape) -> np.ndarray:
    out = np.empty(shape, "float32")
    out.flags.writeable = False
    return out


def test_pipeline_reads_into_zarrs_output_buffer(tmp_path, outs):
    data = write_partial(tmp_path / "a.zarr", fill_value=-1)
    with zarr.config.set(PIPELINE):
        got = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[2:29, 1:38]
    np.testing.assert_array_equal(got, data[2:29, 1:38])
    assert len(outs) == 1 and outs[0] is not None
    assert np.shares_memory(got, outs[0])
    # zarr's output of an array of order F is not C-contiguous: copied.
    outs.clear()
    with zarr.config.set({**PIPELINE, "array.order": "F"}):
        got = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[2:29, 1:38]
    np.testing.assert_array_equal(got, data[2:29, 1:38])
    assert outs == [None]


# --- GPU ---------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("fill_value", [0, -2.5])
@pytest.mark.parametrize("shards", [None, (8, 10)])
@pytest.mark.parametrize("selection", SELECTIONS, ids=repr)
def test_gpu_reads_into_cupy_arrays_like_the_normal_read(tmp_path, selection, shards, fill_value):
    cp = cupy_or_skip()
    data = write_partial(tmp_path / "a.zarr", fill_value=fill_value, shards=shards)
    array = open_array(str(tmp_path / "a.zarr"))
    want = data[selection]
    out = cp.empty(want.shape, want.dtype)
    out.view(cp.uint8)[...] = 0xA5
    got = array.read(selection, device="cuda", out=out)
    assert got is out
    np.testing.assert_array_equal(cp.asnumpy(out), want)
    np.testing.assert_array_equal(cp.asnumpy(out), cp.asnumpy(array.read(selection, device="cuda")))
    # device=None reads on out's device.
    out[...] = 7
    assert array.read(selection, out=out) is out
    np.testing.assert_array_equal(cp.asnumpy(out), want)


@pytest.mark.gpu
def test_gpu_fallback_chains_read_into_cupy_arrays(tmp_path):
    cp = cupy_or_skip()
    blosclz = zc.BloscCodec(cname="blosclz")
    data = write_partial(tmp_path / "b.zarr", fill_value=4, compressors=blosclz)
    out = cp.full(data.shape, 99, data.dtype)
    with pytest.warns(zarrs_nvcomp.CpuPathWarning):
        got = read_chunks_parallel(str(tmp_path / "b.zarr"), device="cuda:0", out=out)
    assert got is out
    np.testing.assert_array_equal(cp.asnumpy(out), data)


@pytest.mark.gpu
def test_gpu_blosc_chains_read_into_cupy_arrays(tmp_path):
    cp = cupy_or_skip()
    data = write_partial(tmp_path / "b.zarr", fill_value=4, compressors=zc.BloscCodec())
    for selection in SELECTIONS:
        want = data[selection]
        out = cp.full(want.shape, 99, want.dtype)
        got = read_chunks_parallel(str(tmp_path / "b.zarr"), selection, device="cuda:0", out=out)
        assert got is out
        np.testing.assert_array_equal(cp.asnumpy(out), want, err_msg=repr(selection))


@pytest.mark.gpu
def test_gpu_bad_outs_raise_value_error(tmp_path):
    cp = cupy_or_skip()
    write_partial(tmp_path / "a.zarr", fill_value=1)
    array = open_array(str(tmp_path / "a.zarr"))
    cases = [
        (cp.empty((30, 41), "float32"), None, "has shape"),
        (cp.empty((30, 40), "float64"), None, "has dtype float64"),
        (cp.empty((40, 30), "float32").T, None, "is not C-contiguous"),
        (cp.empty((30, 40), "float32"), "cpu", "needs a NumPy array"),
        (cp.empty((30, 40), "float32"), "cuda:1", "not of the read's device cuda:1"),
    ]
    for out, device, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            array.read(device=device, out=out)


@pytest.mark.gpu
def test_gpu_pipeline_reads_into_zarrs_device_buffer(tmp_path, outs):
    cp = cupy_or_skip()
    data = write_partial(tmp_path / "a.zarr", fill_value=-1)
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu():
        got = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[2:29, 1:38]
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(got), data[2:29, 1:38])
    assert len(outs) == 1 and isinstance(outs[0], cp.ndarray)
    assert outs[0].data.ptr == got.data.ptr


@pytest.mark.gpu
def test_gpu_pipeline_reads_sharded_arrays(tmp_path):
    """zarr reads a sharded array shard by shard through its sharding codec,
    whose inner chunks (GPU buffers under enable_gpu) the pipeline decodes."""
    cp = cupy_or_skip()
    data = write_partial(tmp_path / "s.zarr", fill_value=-1, shards=(8, 10))
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu():
        got = zarr.open_array(str(tmp_path / "s.zarr"), mode="r")[2:29, 1:38]
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(got), data[2:29, 1:38])
