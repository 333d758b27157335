"""Children forked after the parent used the engine or the reader work (they
hung before: the parent's thread pool and runtime have no threads in a
child). Every child call is waited for with a time limit, so that a hang
fails the test instead of hanging it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import s3_options, upload

import zarrs_nvcomp
from zarrs_nvcomp import NvCompBatchCodec, open_array, read_chunks_parallel
from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec

#: Seconds a child call may take; a hang fails the test after this.
CHILD_LIMIT = 60

#: What the children use: set by the parent before it forks them.
INHERITED: dict[str, object] = {}


def in_fork_pool(function, args):
    """``function`` over ``args`` in a pool of forked children."""
    with multiprocessing.get_context("fork").Pool(2) as pool:
        try:
            return pool.map_async(function, args).get(timeout=CHILD_LIMIT)
        except multiprocessing.TimeoutError:
            pytest.fail(f"forked children did not finish within {CHILD_LIMIT} s (hung)")


def payloads(seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 8, size=50_000, dtype=np.uint8).tobytes() for _ in range(16)]


def codec_roundtrip(seed: int) -> bool:
    codec = INHERITED["codec"]
    data = payloads(seed)
    decoded = codec.decode_batch(codec.encode_batch(data))
    return [bytes(d) for d in decoded] == data


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("algorithm", ["lz4", "zstd", "gdeflate"])
def test_batch_calls_in_children_forked_after_use(algorithm, device):
    codec = NvCompBatchCodec(algorithm, device=device)
    assert codec_roundtrip_with(codec, seed=0)
    assert in_fork_pool(codec_roundtrip, range(1, 5)) == [True] * 4


def codec_roundtrip_with(codec, seed: int) -> bool:
    INHERITED["codec"] = codec
    return codec_roundtrip(seed)


def write_local(path: Path) -> np.ndarray:
    data = np.arange(120 * 90, dtype=np.float32).reshape(120, 90) % 17
    z = zarr.create_array(
        str(path), shape=data.shape, chunks=(16, 16), dtype=data.dtype,
        compressors=zarr.codecs.ZstdCodec(level=1),
    )  # fmt: skip
    z[:] = data
    return data


def read_url(selection_row: int) -> np.ndarray:
    return read_chunks_parallel(INHERITED["url"], (selection_row, ...), device="cpu")


def read_opened(selection_row: int) -> np.ndarray:
    return INHERITED["array"].read((selection_row, ...), device="cpu")


@pytest.mark.parametrize("name", ["plain", "a b %20 ü"])
def test_reads_in_children_forked_after_use(tmp_path, name):
    path = tmp_path / f"{name}.zarr"
    data = write_local(path)
    np.testing.assert_array_equal(read_chunks_parallel(str(path), device="cpu"), data)
    INHERITED["url"] = str(path)
    INHERITED["array"] = open_array(str(path))
    rows = [0, 17, 63, 119]
    for got, row in zip(in_fork_pool(read_url, rows), rows, strict=True):
        np.testing.assert_array_equal(got, data[row])
    for got, row in zip(in_fork_pool(read_opened, rows), rows, strict=True):
        np.testing.assert_array_equal(got, data[row])


def test_s3_array_opened_in_the_parent_reads_in_children(tmp_path, moto_endpoint):
    endpoint, client = moto_endpoint
    local = tmp_path / "s3.zarr"
    data = write_local(local)
    upload(client, local, "bucket", "fork/s3.zarr")
    array = open_array("s3://bucket/fork/s3.zarr", storage_options=s3_options(endpoint))
    np.testing.assert_array_equal(array.read(device="cpu"), data)
    INHERITED["array"] = array
    rows = [3, 50, 101]
    for got, row in zip(in_fork_pool(read_opened, rows), rows, strict=True):
        np.testing.assert_array_equal(got, data[row])


def zarr_read(row: int) -> np.ndarray:
    with zarrs_nvcomp.set_zarr_batch_size():
        return zarr.open_array(INHERITED["zarr_store"], mode="r")[row]


@pytest.mark.parametrize("device", [None, "cpu"])
def test_zarr_reads_in_a_fork_pool(tmp_path, device):
    data = np.arange(64 * 48, dtype=np.int32).reshape(64, 48) % 1000
    store = str(tmp_path / "z.zarr")
    with zarrs_nvcomp.set_zarr_batch_size():
        z = zarr.create_array(
            store, shape=data.shape, chunks=(8, 8), dtype=data.dtype,
            compressors=NvCompBatchZarrCodec(algorithm="zstd", device=device),
        )  # fmt: skip
        z[:] = data
        np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], data)
    INHERITED["zarr_store"] = store
    rows = [0, 9, 31, 63]
    for got, row in zip(in_fork_pool(zarr_read, rows), rows, strict=True):
        np.testing.assert_array_equal(got, data[row])


def gpu_child() -> tuple[str, str, bool]:
    """In a child of a parent that used CUDA: the reason the GPU is unusable,
    the error of a ``"cuda"`` codec, and whether ``device=None`` decodes on the CPU."""
    reason = zarrs_nvcomp.gpu_unavailable_reason(0) or ""
    try:
        NvCompBatchCodec("lz4", device="cuda").encode_batch([b"x" * 100])
        error = ""
    except zarrs_nvcomp.GpuUnavailableError as e:
        error = str(e)
    auto = INHERITED["codec"]
    data = payloads(7)
    return reason, error, [bytes(d) for d in auto.decode_batch(auto.encode_batch(data))] == data


@pytest.mark.gpu
def test_cuda_in_a_forked_child_says_to_use_spawn():
    codec = NvCompBatchCodec("lz4", device=None)
    assert codec.backend.startswith("cuda")
    assert codec_roundtrip_with(codec, seed=0)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        try:
            reason, error, auto_ok = pool.apply_async(gpu_child).get(timeout=CHILD_LIMIT)
        except multiprocessing.TimeoutError:
            pytest.fail(f"the forked child did not finish within {CHILD_LIMIT} s (hung)")
    assert "spawn" in reason, reason
    assert "spawn" in error, error
    assert auto_ok, "a device=None codec of the parent did not fall back to the CPU in the child"
