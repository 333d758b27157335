"""Children forked after the parent used the engine or the reader work (they
hung before: the parent's thread pool and runtime have no threads in a
child). Every child call is waited for with a time limit, so that a hang
fails the test instead of hanging it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import BLOSC_LZ4_SHUFFLE, s3_options, upload

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


def pipeline_rows(rows: tuple[int, int]) -> bool:
    """Writes ``rows`` of the inherited array through the codec pipeline,
    then reads them back; whether they read back as written."""
    z, data = INHERITED["pipeline_array"], INHERITED["pipeline_data"]
    with zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}):
        z[rows[0] : rows[1]] = data[rows[0] : rows[1]]
        return bool((z[rows[0] : rows[1]] == data[rows[0] : rows[1]]).all())


@pytest.mark.parametrize("store", ["memory", "local"])
def test_codec_pipeline_reads_and_writes_in_a_fork_pool(tmp_path, store):
    # A memory store's chunks are fetched by zarr and decoded (and encoded)
    # in batch calls into Rust, a local store's read by the chunk-parallel
    # reader: both hung in children once the parent had used them.
    data = np.arange(64 * 48, dtype=np.int32).reshape(64, 48) % 1000
    target = zarr.storage.MemoryStore() if store == "memory" else str(tmp_path / "p.zarr")
    with zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}):
        z = zarr.create_array(
            target, shape=data.shape, chunks=(8, 8), dtype=data.dtype,
            compressors=zarr.codecs.ZstdCodec(level=1),
            serializer=zarr.codecs.BytesCodec(),
        )  # fmt: skip
        z[:] = data * 0
        np.testing.assert_array_equal(z[:], data * 0)
    INHERITED["pipeline_array"], INHERITED["pipeline_data"] = z, data
    assert in_fork_pool(pipeline_rows, [(0, 16), (16, 40)]) == [True, True]
    if store == "local":
        np.testing.assert_array_equal(zarr.open_array(target, mode="r")[:40], data[:40])


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


# --- writes ----------------------------------------------------------------

#: Ways the parent uses the package before it forks; each used to leave a
#: forked child's multi-chunk write waiting forever for rayon's global pool.
PARENT_USES = {
    "open": lambda url: open_array(url),
    "read": lambda url: read_chunks_parallel(url, device="cpu"),
    "write": lambda url: zarrs_nvcomp.write_chunks_parallel(url, np.zeros((64, 48), "f4")),
    "encode_batch": lambda url: NvCompBatchCodec("zstd", device="cpu").encode_batch(
        [b"z" * 999] * 8
    ),
}


def write_rows(rows: tuple[int, int]) -> int:
    """Writes rows ``rows`` (several chunks) of the inherited array with the row index."""
    start, stop = rows
    values = np.arange(start, stop, dtype="f4")[:, None] * np.ones(48, "f4")
    stored, _ = zarrs_nvcomp.write_chunks_parallel(
        INHERITED["url"], values, (slice(start, stop), ...), device="cpu"
    )
    return stored


def forked_writes(path: Path, parent_use: str, **create) -> None:
    url = str(path)
    zarrs_nvcomp.create_array(url, shape=(64, 48), dtype="f4", **create)
    PARENT_USES[parent_use](url)
    INHERITED["url"] = url
    # Whole shards each: writes of one shard in two processes would race.
    rows = [(0, 16), (16, 32), (32, 64)]
    assert all(n > 1 for n in in_fork_pool(write_rows, rows))
    expected = np.arange(64, dtype="f4")[:, None] * np.ones(48, "f4")
    np.testing.assert_array_equal(read_chunks_parallel(url, device="cpu"), expected)


@pytest.mark.parametrize("parent_use", sorted(PARENT_USES))
def test_writes_in_children_forked_after_use(tmp_path, parent_use):
    forked_writes(tmp_path / "w.zarr", parent_use, chunks=(8, 8))


@pytest.mark.parametrize(
    "create",
    [
        {"chunks": (8, 8), "compressor": "gzip"},
        {"chunks": (8, 8), "shards": (16, 16)},
        {"chunks": (8, 8), "compressor": BLOSC_LZ4_SHUFFLE},
        {"chunks": (8, 8), "zarr_format": 2, "compressor": "lz4"},
    ],
    ids=["gzip", "sharded", "blosc", "v2-lz4"],
)
def test_every_write_path_works_in_forked_children(tmp_path, create):
    forked_writes(tmp_path / "w.zarr", "write", **create)


#: Writes an array with Dask's processes scheduler over forked workers
#: after the parent wrote it (argv[1]: the array's path); prints "ok".
DASK_FORK_WRITE = """
import sys
import dask, dask.array as da, numpy as np, zarrs_nvcomp
url = sys.argv[1]
zarrs_nvcomp.create_array(url, shape=(64, 48), dtype="f4", chunks=(8, 8))
zarrs_nvcomp.write_chunks_parallel(url, np.zeros((64, 48), "f4"))
data = np.arange(64 * 48, dtype="f4").reshape(64, 48)

def store(block, block_info=None):
    (r0, r1), (c0, c1) = block_info[0]["array-location"]
    zarrs_nvcomp.write_chunks_parallel(url, block, (slice(r0, r1), slice(c0, c1)), device="cpu")
    return np.ones((1, 1), "i8")

blocks = da.from_array(data, chunks=(16, 48)).map_blocks(store, dtype="i8", chunks=(1, 1))
with dask.config.set({"multiprocessing.context": "fork"}):
    assert blocks.sum().compute(scheduler="processes", num_workers=2) == 4
np.testing.assert_array_equal(zarrs_nvcomp.read_chunks_parallel(url, device="cpu"), data)
print("ok", flush=True)
"""


def test_dask_processes_scheduler_with_fork_writes(tmp_path):
    pytest.importorskip("dask.array")
    # In its own process group, so that hung workers are killed with it.
    child = subprocess.Popen(
        [sys.executable, "-c", DASK_FORK_WRITE, str(tmp_path / "d.zarr")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=CHILD_LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"Dask's forked workers did not finish within {CHILD_LIMIT} s (hung)")
    assert child.returncode == 0 and out.strip() == "ok", err[-3000:]
