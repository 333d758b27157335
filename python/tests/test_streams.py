"""stream= on the codec and its batch calls: what is accepted, and ordering on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp import NvCompBatchCodec
from zarrs_nvcomp._buffers import stream_handle


class CudaPythonStream:
    """CUDA Python's protocol: ``__cuda_stream__() -> (version, handle)``."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


class BadProtocol:
    def __cuda_stream__(self) -> int:
        return 7


class CupyLike:
    ptr = 0x1234


class TorchLike:
    cuda_stream = 0x5678


@pytest.mark.parametrize(
    ("stream", "handle"),
    [
        (None, None),
        (0, 0),
        (2, 2),
        (0xDEADBEEF, 0xDEADBEEF),
        (CudaPythonStream(0xABC), 0xABC),
        (CupyLike(), 0x1234),
        (TorchLike(), 0x5678),
    ],
)
def test_stream_objects_and_handles_parse(stream, handle):
    assert stream_handle(stream) == handle


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (-1, zarrs_nvcomp.InvalidArgumentError),
        (True, zarrs_nvcomp.UnsupportedTypeError),
        ("stream", zarrs_nvcomp.UnsupportedTypeError),
        (1.5, zarrs_nvcomp.UnsupportedTypeError),
        (BadProtocol(), zarrs_nvcomp.InvalidArgumentError),
    ],
)
def test_other_streams_are_rejected_at_construction(stream, error):
    with pytest.raises(error):
        NvCompBatchCodec("lz4", device="cpu", stream=stream)


def test_host_batches_take_a_stream_and_give_the_same_bytes():
    codec = NvCompBatchCodec("zstd", device="cpu", stream=0)
    data = [np.arange(5000, dtype=np.float32).tobytes()]
    assert codec.encode_batch(data, stream=2) == codec.encode_batch(data)
    with pytest.raises(zarrs_nvcomp.UnsupportedTypeError):
        codec.decode_batch(codec.encode_batch(data), stream="default")


@pytest.mark.gpu
def test_device_work_is_ordered_after_the_callers_stream():
    cp = cupy_or_skip()
    codec = NvCompBatchCodec("lz4", device="cuda", trusted_input=True)
    host = np.cumsum(np.random.default_rng(1).standard_normal(1 << 22)).astype(np.float32)
    encoded = codec.encode_batch([cp.asarray(host)])
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        # Written on the caller's stream right before the call: the codec
        # must wait for this work, not for CuPy's default stream.
        inputs = [cp.asarray(encoded[0]) for _ in range(64)]
        outputs = [cp.empty(host.nbytes, cp.uint8) for _ in range(64)]
    decoded = codec.decode_batch(inputs, outputs, stream=stream)
    with stream:
        total = float(cp.stack([d.view(cp.float32) for d in decoded]).sum(dtype=cp.float64))
    assert total == pytest.approx(64 * float(host.sum(dtype=np.float64)), rel=1e-6)
