"""Device buffers (CuPy, PyTorch): device in, device out, no trip through host memory."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from conftest import ALL_ALGORITHMS, CPU_ALGORITHMS, cuda_codec, cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp import NvCompBatchCodec, _buffers

pytestmark = pytest.mark.gpu


def chunks(n: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [
        np.cumsum(rng.standard_normal(1000 * (i + 1))).round(2).astype(np.float32) for i in range(n)
    ]


@pytest.mark.parametrize("algorithm", ALL_ALGORITHMS)
def test_cupy_in_cupy_out(algorithm):
    cp, codec = cuda_codec(algorithm)
    assert codec.backend == "cuda:0"
    host = chunks()
    device = [cp.asarray(c) for c in host]
    encoded = codec.encode_batch(device)
    assert all(isinstance(e, cp.ndarray) and e.dtype == cp.uint8 for e in encoded)
    decoded = codec.decode_batch(encoded)
    assert all(isinstance(d, cp.ndarray) for d in decoded)
    for h, d in zip(host, decoded, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(d).view(np.float32), h)
    single = codec.decode(codec.encode(device[0]))
    assert isinstance(single, cp.ndarray)


@pytest.mark.parametrize("algorithm", ALL_ALGORITHMS)
def test_cupy_out(algorithm):
    cp, codec = cuda_codec(algorithm)
    host = chunks()
    encoded = codec.encode_batch([cp.asarray(c) for c in host])
    out = [cp.empty(c.shape, dtype=cp.float32) for c in host]
    assert codec.decode_batch(encoded, out=out) is not None
    for h, o in zip(host, out, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(o), h)
    with pytest.raises(ValueError):
        codec.decode_batch(encoded[:1], out=[cp.empty(3, dtype=cp.uint8)])
    with pytest.raises(ValueError, match="same side"):
        codec.decode_batch(encoded[:1], out=[np.empty(host[0].nbytes, dtype=np.uint8)])


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_cupy_out_with_none_entries_allocates_them(device):
    # kvikio's decode_batch allocated the device outputs given as None.
    cp = cupy_or_skip()
    codec = NvCompBatchCodec("zstd", device=device)
    host = chunks(4)
    encoded = codec.encode_batch([cp.asarray(c) for c in host])
    given = [None, cp.empty(host[1].shape, dtype=cp.float32), None, None]
    result = codec.decode_batch(encoded, out=given)
    assert result[1] is given[1]
    assert all(isinstance(r, cp.ndarray) for r in result)
    for h, r in zip(host, result, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(r).view(np.float32).reshape(h.shape), h)


def test_torch_dlpack():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    cupy_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    codec = NvCompBatchCodec("lz4", device="cuda")
    tensors = [torch.arange(n, dtype=torch.float32, device="cuda") for n in (10, 1000)]
    decoded = codec.decode_batch(codec.encode_batch(tensors))
    for t, d in zip(tensors, decoded, strict=True):
        assert torch.equal(torch.from_dlpack(d).view(torch.float32), t)

    class DlpackOnly:  # hides __cuda_array_interface__
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kwargs):
            return self.t.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    decoded = codec.decode_batch(codec.encode_batch([DlpackOnly(t) for t in tensors]))
    for t, d in zip(tensors, decoded, strict=True):
        assert torch.equal(torch.from_dlpack(d).view(torch.float32), t)


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_gpu_and_cpu_read_each_other(algorithm):
    cp = cupy_or_skip()
    gpu = NvCompBatchCodec(algorithm, device="cuda")
    cpu = NvCompBatchCodec(algorithm, device="cpu")
    host = chunks()
    from_gpu = [cp.asnumpy(e) for e in gpu.encode_batch([cp.asarray(c) for c in host])]
    for h, d in zip(host, cpu.decode_batch(from_gpu), strict=True):
        np.testing.assert_array_equal(d.view(np.float32), h)
    from_cpu = [cp.asarray(np.frombuffer(e, np.uint8)) for e in cpu.encode_batch(host)]
    for h, d in zip(host, gpu.decode_batch(from_cpu), strict=True):
        np.testing.assert_array_equal(cp.asnumpy(d).view(np.float32), h)
    # host buffers on the GPU backend, device buffers on the CPU backend
    for h, d in zip(host, gpu.decode_batch(cpu.encode_batch(host)), strict=True):
        np.testing.assert_array_equal(d.view(np.float32), h)
    on_cpu = cpu.decode_batch(
        [cp.asarray(np.frombuffer(e, np.uint8)) for e in cpu.encode_batch(host)]
    )
    assert all(isinstance(d, cp.ndarray) for d in on_cpu)


@pytest.mark.parametrize(("ours", "theirs"), [("lz4", "LZ4"), ("zstd", "Zstd"), ("gzip", "GZip")])
def test_numcodecs_interop_on_gpu(ours, theirs):
    import numcodecs

    cp = cupy_or_skip()
    codec = NvCompBatchCodec(ours, device="cuda")
    other = getattr(numcodecs, theirs)()
    host = chunks()
    theirs_enc = [cp.asarray(np.frombuffer(bytes(other.encode(c)), np.uint8)) for c in host]
    for h, d in zip(host, codec.decode_batch(theirs_enc), strict=True):
        np.testing.assert_array_equal(cp.asnumpy(d).view(np.float32), h)
    for h, e in zip(host, codec.encode_batch([cp.asarray(c) for c in host]), strict=True):
        np.testing.assert_array_equal(
            np.frombuffer(bytes(other.decode(cp.asnumpy(e).tobytes())), np.float32), h
        )


def test_device_results_without_cupy(monkeypatch):
    cp = cupy_or_skip()
    from zarrs_nvcomp import _buffers

    codec = NvCompBatchCodec("lz4", device="cuda")
    encoded = codec.encode_batch([cp.asarray(c) for c in chunks(2)])
    monkeypatch.setattr(_buffers, "cupy_module", lambda: None)
    decoded = codec.decode_batch(encoded)
    assert all(isinstance(d, zarrs_nvcomp.CudaArray) for d in decoded)
    monkeypatch.undo()
    for h, d in zip(chunks(2), decoded, strict=True):
        # Both interfaces of the one device-result type, without a copy.
        np.testing.assert_array_equal(cp.asnumpy(cp.asarray(d)).view(np.float32), h)
        np.testing.assert_array_equal(cp.asnumpy(cp.from_dlpack(d)).view(np.float32), h)
        assert cp.from_dlpack(d).data.ptr == d.ptr


def _churn(codec, host):
    """Decodes a batch of zeros of ``host``'s shapes: new device allocations,
    where freed memory of earlier results would be handed out again."""
    cp = cupy_or_skip()
    return codec.decode_batch(codec.encode_batch([cp.zeros(h.shape, cp.float32) for h in host]))


@pytest.mark.parametrize("algorithm", ["lz4", "zstd", "ans"])
def test_views_out(algorithm):
    cp, codec = cuda_codec(algorithm, device_outputs="views")
    host = chunks()
    encoded = codec.encode_batch([cp.asarray(c) for c in host])
    assert all(isinstance(e, zarrs_nvcomp.CudaArray) for e in encoded)
    # Views given back as inputs (read through their fields), on a stream.
    decoded = codec.decode_batch(encoded, stream=cp.cuda.Stream(non_blocking=True))
    assert all(isinstance(d, zarrs_nvcomp.CudaArray) for d in decoded)
    assert all(d.__cuda_array_interface__["stream"] is None for d in decoded)
    as_cupy = [cp.asarray(d) for d in decoded]
    assert [a.data.ptr for a in as_cupy] == [d.ptr for d in decoded]  # no copy
    for h, a in zip(host, as_cupy, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(a).view(np.float32), h)
    # One view kept: the whole allocation stays, whatever is allocated after.
    kept = decoded[3]
    del decoded, as_cupy, encoded
    gc.collect()
    _churn(codec, host)
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(kept)).view(np.float32), host[3])


def test_cupy_outputs_share_one_allocation_that_outlives_the_list():
    cp, codec = cuda_codec("zstd")
    host = chunks()
    decoded = codec.decode_batch(codec.encode_batch([cp.asarray(c) for c in host]))
    assert len({id(d.data.mem) for d in decoded}) == 1
    kept = decoded[2]
    del decoded
    gc.collect()
    _churn(codec, host)
    np.testing.assert_array_equal(cp.asnumpy(kept).view(np.float32), host[2])


def test_device_views_of_a_packed_result_match_the_list_form():
    cp, codec = cuda_codec("lz4", device_outputs="views")
    host = chunks()
    encoded = codec.encode_batch([cp.asarray(c) for c in host])
    sizes = np.array([e.nbytes for e in encoded], np.uint64)
    packed = cp.concatenate([cp.asarray(e) for e in encoded])
    data, decoded_sizes = codec.decode_packed(packed, sizes)
    views = zarrs_nvcomp.device_views(data, decoded_sizes)
    assert [v.device for v in views] == [0] * len(host)
    for h, v in zip(host, views, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(cp.asarray(v)).view(np.float32), h)


@pytest.mark.parametrize("algorithm", ["lz4", "ans"])
def test_batch_ranges_read_from_one_buffer_match_the_ranges(algorithm):
    """``_buffers.batch_ranges`` (one uint64 buffer) gives what ``ranges`` (a
    list of tuples) does, for encoded results (alignment gaps) and decoded ones."""
    cp, codec = cuda_codec(algorithm)
    regions = _buffers.device_regions([cp.asarray(c) for c in chunks()], "input")[0]
    encoded = codec._engine.device_batch(regions, True)
    decoded = codec._engine.device_batch(
        _buffers.device_regions(encoded.arrays(), "input")[0], False
    )
    for batch in (encoded, decoded):
        ranges = _buffers.batch_ranges(batch)
        assert ranges.dtype == np.uint64 and ranges.shape == (len(batch), 2)
        assert ranges.tolist() == [list(r) for r in batch.ranges]
