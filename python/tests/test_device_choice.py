"""device=None: where a batch runs, given the thresholds, and what the codec reports."""

from __future__ import annotations

import numpy as np
import pytest

from zarrs_nvcomp import NvCompBatchCodec, _device_choice
from zarrs_nvcomp._device_choice import Thresholds, use_gpu

T = Thresholds(min_items=16, min_bytes=1 << 20)


@pytest.mark.parametrize(
    ("items", "nbytes", "gpu"),
    [
        (1, 1 << 30, False),  # one huge buffer: one thread block on the GPU
        (15, 1 << 30, False),
        (16, (1 << 20) - 1, False),  # many tiny buffers: the call's fixed cost
        (16, 1 << 20, True),
        (65536, 1 << 36, True),
    ],
)
def test_host_batches_go_to_the_gpu_only_above_both_thresholds(items, nbytes, gpu):
    chosen = use_gpu(on_device=False, items=items, nbytes=nbytes, thresholds=T, gpu_usable=True)
    assert chosen == gpu


def test_device_inputs_stay_on_the_gpu_and_nothing_goes_to_an_unusable_one():
    assert use_gpu(on_device=True, items=1, nbytes=1, thresholds=T, gpu_usable=True)
    assert not use_gpu(on_device=True, items=10**6, nbytes=1 << 40, thresholds=T, gpu_usable=False)
    assert not use_gpu(on_device=False, items=10**6, nbytes=1 << 40, thresholds=T, gpu_usable=False)


def test_the_thresholds_send_single_buffers_to_the_cpu():
    for thresholds in (_device_choice.DECODE, _device_choice.ENCODE):
        for nbytes in (64 << 10, 1 << 20):
            assert not use_gpu(
                on_device=False, items=1, nbytes=nbytes, thresholds=thresholds, gpu_usable=True
            )


def test_decode_counts_compressed_bytes():
    # 1,024 Zstandard buffers of 64 KiB of field data: about 28 MiB
    # compressed, decoded in 10.9 ms on the H200 against 17.5 on its 16 cores.
    zstd = _device_choice.decode_thresholds("zstd")
    assert use_gpu(
        on_device=False, items=1024, nbytes=int(27.7 * (1 << 20)), thresholds=zstd, gpu_usable=True
    )
    # 256 such buffers (the CPU was faster): too few.
    assert not use_gpu(
        on_device=False, items=256, nbytes=int(6.9 * (1 << 20)), thresholds=zstd, gpu_usable=True
    )


def test_host_lz4_batches_decode_on_the_cpu_at_any_size():
    lz4 = _device_choice.decode_thresholds("lz4")
    zstd = _device_choice.decode_thresholds("zstd")
    assert not use_gpu(
        on_device=False, items=1 << 20, nbytes=1 << 40, thresholds=lz4, gpu_usable=True
    )
    assert use_gpu(on_device=False, items=1 << 20, nbytes=1 << 40, thresholds=zstd, gpu_usable=True)
    # Device inputs stay on the GPU whatever the algorithm.
    assert use_gpu(on_device=True, items=1, nbytes=1, thresholds=lz4, gpu_usable=True)


@pytest.mark.gpu
def test_auto_decodes_a_large_host_lz4_batch_on_the_cpu():
    codec = NvCompBatchCodec("lz4")
    assert codec.backend.startswith("cuda")
    chunks = [np.full(1024, i % 251, np.uint8) for i in range(4096)]
    encoded = NvCompBatchCodec("lz4", device="cpu").encode_batch(chunks)
    decoded = codec.decode_batch(encoded)
    assert codec.last_backend == "cpu"
    assert [bytes(memoryview(d)) for d in decoded] == [c.tobytes() for c in chunks]


def test_last_backend_records_where_a_call_ran():
    codec = NvCompBatchCodec("lz4", device="cpu")
    assert codec.last_backend is None
    codec.decode_batch(codec.encode_batch([b"abc" * 100]))
    assert codec.last_backend == "cpu"


@pytest.mark.gpu
def test_auto_runs_small_host_batches_on_the_cpu_and_large_ones_on_the_gpu(monkeypatch):
    codec = NvCompBatchCodec("lz4")
    assert codec.backend.startswith("cuda")
    data = np.arange(1000, dtype=np.float32)
    on_cpu = codec.encode_batch([data])
    assert codec.last_backend == "cpu"
    monkeypatch.setattr(_device_choice, "ENCODE", Thresholds(min_items=1, min_bytes=1))
    on_gpu = codec.encode_batch([data])
    assert codec.last_backend.startswith("cuda")
    # The two encoders write different LZ4 bitstreams; both decode to the data.
    for encoded in (on_cpu, on_gpu):
        assert bytes(memoryview(codec.decode_batch(encoded)[0])) == data.tobytes()
