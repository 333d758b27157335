"""zarrs_nvcomp.NvcompCodecPipeline as zarr's codec pipeline: every read and
write through zarr's public API gives what zarr's default pipeline gives, and
batched chains are decoded in one engine call per read."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from chain_cases import CASES, write_case
from conftest import create_like, cupy_or_skip
from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from zarr.core.buffer import cpu

import zarrs_nvcomp
from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec

PIPELINE = {"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}

DTYPES = [
    "|b1",
    "i1",
    "u1",
    "<i2",
    "<u2",
    "<i4",
    "<u4",
    "<i8",
    "<u8",
    "<f2",
    "<f4",
    "<f8",
    "<c8",
    "<c16",
    "<M8[s]",
    "<m8[ms]",
    "S7",
    "<U5",
    "V6",
]


def sample(dtype: np.dtype, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype.kind in "mM":
        return rng.integers(0, 10**9, n).astype(dtype).reshape(shape)
    if dtype.kind == "U":
        letters = np.array(list("abcdefgh"))
        return np.array(["".join(rng.choice(letters, 4)) for _ in range(n)], dtype).reshape(shape)
    if dtype.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dtype).reshape(shape)
    if dtype.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype).reshape(shape)
    raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def engine_calls(paths) -> list[int]:
    return [n for kind, n in paths if kind == "engine"]


def in_store(path: Path, kind: str):
    """The array written at ``path``, in a local store or copied into a
    MemoryStore (which the reader cannot open: the engine path)."""
    if kind == "local":
        return path
    files = {
        f.relative_to(path).as_posix(): cpu.Buffer.from_bytes(f.read_bytes())
        for f in path.rglob("*")
        if f.is_file()
    }
    return zarr.storage.MemoryStore(files)


def read_both(store, selection, *, method="__getitem__"):
    """``selection`` of the array in ``store`` through zarr's default
    pipeline and through ours."""
    expected = getattr(zarr.open_array(store, mode="r"), method)(selection)
    with zarr.config.set(PIPELINE):
        array = zarr.open_array(store, mode="r")
        assert type(array._async_array.codec_pipeline).__name__ == "NvcompCodecPipeline"
        got = getattr(array, method)(selection)
    return expected, got


def assert_reads_on_the_gpu(cp, source, selections, reference) -> None:
    """Each of ``selections`` of the array in ``source`` reads, through the
    pipeline under ``enable_gpu()``, as a CuPy array equal to ``reference``'s."""
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu():
        array = zarr.open_array(source, mode="r")
        for selection in selections:
            got = array[selection]
            assert isinstance(got, cp.ndarray)
            np.testing.assert_array_equal(cp.asnumpy(got), reference[selection])


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_reads_as_zarr_reads_it(tmp_path, dtype, zarr_format, store, paths):
    dtype = np.dtype(dtype)
    data = sample(dtype, (23, 17))
    compressors = numcodecs.Zstd(level=1) if zarr_format == 2 else [ZstdCodec(level=1)]
    z = zarr.create_array(
        tmp_path / "a",
        shape=data.shape,
        chunks=(8, 8),
        dtype=dtype,
        compressors=compressors,
        zarr_format=zarr_format,
    )
    z[...] = data
    expected, got = read_both(in_store(tmp_path / "a", store), (slice(1, 22, 2), slice(None)))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, data[1:22:2])
    if store == "local":
        assert paths == [("reader", (slice(1, 22, 2), slice(0, 17, 1)))]
    else:
        # 11 rows of 8 x 8 chunks from three chunk rows by three chunk columns: one call.
        assert paths == [("engine", 9)]


CHAINS = {
    "zstd": dict(compressors=[ZstdCodec(level=3)]),
    "zstd+crc32c": dict(compressors=[ZstdCodec(), Crc32cCodec()]),
    "gzip": dict(compressors=[GzipCodec(level=1)]),
    "numcodecs.lz4": dict(compressors=[zarr.codecs.numcodecs.LZ4()]),
    "numcodecs.zlib": dict(compressors=[zarr.codecs.numcodecs.Zlib(level=2)]),
    "nvcomp_batch": dict(compressors=[NvCompBatchZarrCodec(algorithm="snappy", device="cpu")]),
    "v2 lz4": dict(compressors=numcodecs.LZ4(), zarr_format=2),
    "v2 gzip": dict(compressors=numcodecs.GZip(), zarr_format=2),
    "v2 zlib order F": dict(compressors=numcodecs.Zlib(), zarr_format=2, order="F"),
    "v2 nvcomp_batch": dict(
        compressors=zarrs_nvcomp.NvCompBatchCodec("zstd", device="cpu"), zarr_format=2
    ),
}


def partly_written(path: Path, chain: str, written, fill_value: float, seed: int) -> np.ndarray:
    """A 50x40 ``<f4`` array of ``chain`` in 16x16 chunks at ``path`` of which only
    ``written`` (an index) is written, the other chunks missing; returns what
    it reads as."""
    data = sample(np.dtype("<f4"), (50, 40), seed=seed)
    z = create_like(path, data, chunks=(16, 16), fill_value=fill_value, **CHAINS[chain])
    z[written] = data[written]
    reference = np.full(data.shape, fill_value, "<f4")
    reference[written] = data[written]
    return reference


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("chain", list(CHAINS))
def test_batched_chains_read_selections_and_fill_values(tmp_path, chain, store, paths):
    reference = partly_written(tmp_path / "a", chain, np.s_[:30, :20], fill_value=7.5, seed=1)
    source = in_store(tmp_path / "a", store)
    selections = [
        (slice(None), slice(None)),
        (slice(3, 47, 5), slice(1, 39, 3)),
        (12, slice(None)),
        (slice(None), 19),
        (Ellipsis,),
    ]
    for selection in selections:
        expected, got = read_both(source, selection)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got, reference[selection])
    by_reader = store == "local"
    assert [kind for kind, _ in paths] == ["reader" if by_reader else "engine"] * len(selections)
    assert all(n > 0 for n in engine_calls(paths))
    paths.clear()
    expected, got = read_both(source, ([1, 17, 45], [0, 39]), method="get_orthogonal_selection")
    np.testing.assert_array_equal(got, reference[np.ix_([1, 17, 45], [0, 39])])
    np.testing.assert_array_equal(got, expected)
    # Index arrays take the engine path: two of the six chunks are written.
    assert paths == [("engine", 2)]


def test_arrays_the_reader_cannot_open_read_through_the_engine(tmp_path, paths):
    # zarrs rejects a v2 null fill value of raw bytes, which zarr reads.
    data = np.array([b"a\0\0", b"bb", b"ccc"], dtype="V7")
    with zarr.config.set(PIPELINE):
        z = zarr.create(
            shape=(3,),
            store=tmp_path / "a",
            chunks=(2,),
            fill_value=None,
            zarr_format=2,
            dtype="V7",
        )
        z[...] = data
        assert (zarr.open_array(tmp_path / "a")[...] == data).all()
    assert [kind for kind, _ in paths] == ["encode", "engine"]


@pytest.mark.parametrize("store", ["local", "memory"])
def test_a_read_of_many_chunks_is_one_call(tmp_path, store, paths):
    data = np.arange(64 * 64, dtype="<u2").reshape(64, 64)
    z = zarr.create_array(tmp_path / "a", shape=data.shape, chunks=(8, 8), dtype="<u2")
    z[...] = data
    with zarr.config.set(PIPELINE):
        np.testing.assert_array_equal(zarr.open_array(in_store(tmp_path / "a", store))[...], data)
    if store == "local":
        assert paths == [("reader", (slice(0, 64, 1), slice(0, 64, 1)))]
    else:
        assert paths == [("engine", 64)]


@pytest.mark.parametrize("store", ["local", "memory"])
def test_sharded_arrays_read_in_one_call(tmp_path, store, paths):
    data = sample(np.dtype("<i4"), (40, 36), seed=2)
    z = create_like(
        tmp_path / "a",
        data,
        shards=(20, 18),
        chunks=(5, 6),
        compressors=[ZstdCodec()],
        fill_value=-1,
    )
    z[:30] = data[:30]
    reference = np.full(data.shape, -1, "<i4")
    reference[:30] = data[:30]
    expected, got = read_both(in_store(tmp_path / "a", store), (slice(None), slice(None)))
    np.testing.assert_array_equal(got, reference)
    np.testing.assert_array_equal(got, expected)
    if store == "local":
        # Every shard's inner chunks in the reader's one call.
        assert paths == [("reader", (slice(0, 40, 1), slice(0, 36, 1)))]
        return
    # Out of the reader's reach, zarr's shard reader hands each shard's inner
    # chunks over: four shards of 4 x 3 inner chunks; the last shard row has
    # two written rows of chunks.
    assert sorted(engine_calls(paths)) == [6, 6, 12, 12]
    assert len(paths) == 4


@pytest.mark.parametrize(
    "codecs",
    [
        dict(compressors=[BloscCodec(cname="blosclz")]),
        dict(compressors=None),
        dict(
            compressors=numcodecs.Zstd(), filters=[numcodecs.Shuffle(elementsize=8)], zarr_format=2
        ),
    ],
    ids=["blosclz", "uncompressed", "v2 shuffle"],
)
def test_other_chains_go_through_zarrs_pipeline(tmp_path, codecs, paths):
    codecs = dict(codecs)
    dtype = codecs.pop("dtype", "<f8")
    data = sample(np.dtype("<f8"), (20, 30), seed=3)
    z = zarr.create_array(tmp_path / "a", shape=data.shape, chunks=(8, 8), dtype=dtype, **codecs)
    z[...] = data
    expected, got = read_both(tmp_path / "a", (slice(2, 19), slice(None, None, 4)))
    np.testing.assert_array_equal(got, data[2:19, ::4])
    np.testing.assert_array_equal(got, expected)
    assert paths == []


BLOSC_CASES = sorted(c for c in CASES if "blosc" in c)


def blosc_path(case_id: str, store: str) -> str | None:
    """How the pipeline reads a blosc case of ``chain_cases``: ``"reader"``,
    ``"engine"`` (the chunks fetched through zarr's store API, decoded in one
    call of the stored-chunk decoder), or None (zarr's pipeline: blosclz)."""
    if "blosclz" in case_id:
        return None
    # The sharded case has a zstd around its shards, which the reader does
    # not batch: zarr's shard reader hands their inner chunks over.
    if store == "local" and "sharded" not in case_id:
        return "reader"
    return "engine"


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("case_id", BLOSC_CASES)
def test_blosc_arrays_read_as_zarr_reads_them(tmp_path, case_id, store, paths):
    data, _ = CASES[case_id]
    source = in_store(write_case(tmp_path, case_id), store)
    selections = [(Ellipsis,), (slice(3, 35, 4), slice(2, None, 3))]
    for selection in selections:
        expected, got = read_both(source, selection)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got, data[selection])
    path = blosc_path(case_id, store)
    assert {kind for kind, _ in paths} == ({path} if path else set())
    if path == "engine" and "sharded" not in case_id:
        # 37 x 29 in 8 x 16 chunks: all 10, then 4 chunk rows of both columns.
        assert engine_calls(paths) == [10, 8]
    elif path == "reader":
        assert len(paths) == len(selections)


def test_blosclz_stays_on_zarrs_pipeline_saying_why(tmp_path):
    path = write_case(tmp_path, "v3-blosc-blosclz-shuffle-int16-0")
    with zarr.config.set(PIPELINE):
        pipeline = zarr.open_array(path, mode="r")._async_array.codec_pipeline
    assert pipeline.batched is None
    assert "blosclz" in pipeline.fallback_reason


@pytest.mark.parametrize("store", ["local", "memory"])
def test_blosc_arrays_are_written_by_zarrs_pipeline_and_read_back(tmp_path, store, paths):
    data = sample(np.dtype("<i4"), (30, 30), seed=8)
    target = tmp_path / "a" if store == "local" else zarr.storage.MemoryStore()
    with zarr.config.set(PIPELINE):
        z = zarr.create_array(
            target,
            shape=data.shape,
            chunks=(7, 9),
            dtype="<i4",
            compressors=[BloscCodec(cname="zstd", shuffle="bitshuffle")],
        )
        z[...] = data
        z[3:11, 4:25] = -data[3:11, 4:25]
    reference = data.copy()
    reference[3:11, 4:25] *= -1
    expected, got = read_both(target, (Ellipsis,))
    np.testing.assert_array_equal(expected, reference)
    np.testing.assert_array_equal(got, reference)
    # No engine encodes: the partial chunks were read and written by zarr.
    assert [kind for kind, _ in paths] == ["reader" if store == "local" else "engine"]


@pytest.mark.parametrize("store", ["local", "memory"])
def test_corrupt_blosc_chunks_name_their_key_and_codec(tmp_path, store):
    data = np.arange(256, dtype="<f4").reshape(16, 16)
    z = zarr.create_array(
        tmp_path / "a",
        shape=data.shape,
        chunks=(8, 8),
        dtype="<f4",
        compressors=[BloscCodec(cname="lz4", shuffle="shuffle")],
    )
    z[...] = data
    chunk = tmp_path / "a" / "c" / "1" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-5])
    if store == "memory":
        pattern = r"chunk c/1/0 \(blosc\) is corrupt"
    else:
        pattern = r"chunk c/1/0 is corrupt.*\(codec blosc, array \S*a\)"
    with zarr.config.set(PIPELINE):
        array = zarr.open_array(in_store(tmp_path / "a", store), mode="r")
        with pytest.raises(zarrs_nvcomp.DecodeError, match=pattern):
            array[...]
        np.testing.assert_array_equal(array[:8], data[:8])


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("chain", list(CHAINS))
def test_writes_encode_in_one_call_and_read_back_everywhere(tmp_path, chain, store, paths):
    data = sample(np.dtype("<i8"), (30, 30), seed=4)
    target = tmp_path / "a" if store == "local" else zarr.storage.MemoryStore()
    with zarr.config.set(PIPELINE):
        z = zarr.create_array(
            target, shape=data.shape, chunks=(7, 9), dtype="<i8", fill_value=5, **CHAINS[chain]
        )
        z[...] = data  # 5 x 4 chunks, all complete
        z[3:11, 4:25] = -data[3:11, 4:25]  # 2 x 3 chunks, all partial: read, merged, written
        z[29, 29] = 0
        z[:7, :9] = 5  # all fill value: deleted
    if store == "local":
        # The chunk-parallel writer: the scalar fill writes zarr's way.
        assert [p for p in paths if p[0] in ("writer", "encode")] == [
            ("writer", 20),
            ("writer", 6),
            ("writer", 1),
        ]
    else:
        assert [p for p in paths if p[0] == "encode"] == [
            ("encode", 20),
            ("encode", 6),
            ("encode", 1),
        ]
        assert ("engine", 6) in paths and ("engine", 1) in paths
    reference = data.copy()
    reference[3:11, 4:25] *= -1
    reference[29, 29] = 0
    reference[:7, :9] = 5
    expected, got = read_both(target, (Ellipsis,))
    np.testing.assert_array_equal(expected, reference)
    np.testing.assert_array_equal(got, reference)
    # The chunk of fill values was deleted.
    assert zarr.open_array(target, mode="r").nchunks_initialized == 19


def test_sharded_writes_encode_each_shards_chunks_in_one_call(tmp_path, paths):
    data = sample(np.dtype("<u4"), (40, 36), seed=6)
    with zarr.config.set(PIPELINE):
        z = zarr.create_array(
            tmp_path / "a",
            shape=data.shape,
            shards=(20, 18),
            chunks=(5, 6),
            dtype="<u4",
            compressors=[ZstdCodec(), Crc32cCodec()],
        )
        z[...] = data
        z[2:9, 7] = 1  # one shard, two inner chunks: read, merged, written
    reference = data.copy()
    reference[2:9, 7] = 1
    expected, got = read_both(tmp_path / "a", (Ellipsis,))
    np.testing.assert_array_equal(expected, reference)
    np.testing.assert_array_equal(got, reference)
    encodes = [n for kind, n in paths if kind == "encode"]
    assert encodes[:4] == [12, 12, 12, 12] and len(encodes) == 5


@pytest.mark.parametrize("store", ["local", "memory"])
def test_corrupt_chunks_name_their_key_and_codec(tmp_path, store):
    data = np.arange(256, dtype="<f4").reshape(16, 16)
    for name, compressors in [("z", [ZstdCodec()]), ("c", [GzipCodec(), Crc32cCodec()])]:
        z = zarr.create_array(
            tmp_path / name, shape=data.shape, chunks=(8, 8), dtype="<f4", compressors=compressors
        )
        z[...] = data
        chunk = tmp_path / name / "c" / "1" / "0"
        raw = bytearray(chunk.read_bytes())
        raw[0 if name == "z" else len(raw) // 2] ^= 0xFF  # zstd's magic number; gzip's stream
        chunk.write_bytes(bytes(raw))
        if store == "memory":
            pattern = r"chunk c/1/0 \((zstd|gzip)\)"
        else:
            pattern = rf"chunk c/1/0 .*\(codec (zstd|gzip), array \S*{name}\)"
        with zarr.config.set(PIPELINE):
            array = zarr.open_array(in_store(tmp_path / name, store), mode="r")
            with pytest.raises(zarrs_nvcomp.DecodeError, match=pattern):
                array[...]
            np.testing.assert_array_equal(array[:8], data[:8])


@pytest.mark.parametrize("store", ["local", "memory"])
def test_truncated_chunks_are_errors_not_wrong_data(tmp_path, store):
    data = np.arange(256, dtype="<f4").reshape(16, 16)
    z = zarr.create_array(
        tmp_path / "a", shape=data.shape, chunks=(8, 8), dtype="<f4", compressors=[ZstdCodec()]
    )
    z[...] = data
    other = zarr.create_array(
        tmp_path / "b", shape=(4, 4), chunks=(4, 4), dtype="<f4", compressors=[ZstdCodec()]
    )
    other[...] = 1
    # A valid zstd frame of the wrong size in the place of c/0/1.
    (tmp_path / "a" / "c" / "0" / "1").write_bytes((tmp_path / "b" / "c" / "0" / "0").read_bytes())
    with zarr.config.set(PIPELINE):
        with pytest.raises(zarrs_nvcomp.DecodeError, match=r"c/0/1.* decodes to 64 bytes"):
            zarr.open_array(in_store(tmp_path / "a", store), mode="r")[...]


def test_the_pipeline_path_resolves_without_importing_the_package():
    # zarr finds the pipeline through the package's entry point.
    code = (
        "import zarr, numpy as np\n"
        "zarr.config.set({'codec_pipeline.path': 'zarrs_nvcomp.NvcompCodecPipeline'})\n"
        "z = zarr.create_array(zarr.storage.MemoryStore(), shape=(10,), chunks=(3,), dtype='i2')\n"
        "z[:] = np.arange(10)\n"
        "assert (z[:] == np.arange(10)).all()\n"
        "print(type(z._async_array.codec_pipeline).__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "zarrs_nvcomp"


@pytest.mark.gpu
@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize(
    "chain", ["zstd", "zstd+crc32c", "numcodecs.zlib", "v2 lz4", "v2 zlib order F"]
)
def test_gpu_buffers_are_decoded_on_the_gpu(tmp_path, chain, store, paths):
    cp = cupy_or_skip()
    reference = partly_written(tmp_path / "a", chain, np.s_[:40], fill_value=2, seed=5)
    selections = [(Ellipsis,), (slice(3, 47, 5), slice(1, 39, 3)), (12, slice(None))]
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu():
        array = zarr.open_array(in_store(tmp_path / "a", store), mode="r")
        for selection in selections:
            got = array[selection]
            assert isinstance(got, cp.ndarray)
            np.testing.assert_array_equal(cp.asnumpy(got), reference[selection])
    by_reader = store == "local"
    assert [kind for kind, _ in paths] == ["reader" if by_reader else "engine"] * len(selections)


@pytest.mark.gpu
@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize(
    "case_id",
    [
        "v3-blosc-lz4-shuffle-int16-0",
        "v3-blosc-zstd-bitshuffle-float64-256",
        "v3-blosc-lz4hc-noshuffle-uint8-0",
        "v2-blosc-zlib-shuffle-float64-256",
        "v2-blosc-zstd-bitshuffle-int16-0",
        "v2-order-F-blosc",
        "v3-sharded-blosc",
        "v3-numcodecs-blosc",
    ],
)
def test_gpu_blosc_arrays_are_decoded_on_the_gpu(tmp_path, case_id, store, paths):
    cp = cupy_or_skip()
    data, _ = CASES[case_id]
    source = in_store(write_case(tmp_path, case_id), store)
    selections = [(Ellipsis,), (slice(3, 35, 4), slice(2, None, 3))]
    assert_reads_on_the_gpu(cp, source, selections, data)
    assert {kind for kind, _ in paths} == {blosc_path(case_id, store)}


@pytest.mark.gpu
@pytest.mark.parametrize("store", ["local", "memory"])
def test_gpu_values_write_through_the_batched_encoder(tmp_path, store, paths):
    cp = cupy_or_skip()
    data = sample(np.dtype("<f8"), (40, 30), seed=7)
    target = tmp_path / "a" if store == "local" else zarr.storage.MemoryStore()
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu():
        z = zarr.create_array(
            target, shape=data.shape, chunks=(16, 16), dtype="<f8", compressors=[ZstdCodec()]
        )
        z[...] = cp.asarray(data)
        z[5:20, 3] = cp.asarray(-data[5:20, 3])
    reference = data.copy()
    reference[5:20, 3] *= -1
    np.testing.assert_array_equal(zarr.open_array(target, mode="r")[...], reference)
    # A local array's box is the chunk-parallel writer's, encoded on the GPU;
    # the column (an integer index) and a memory store's chunks, the engine's.
    first = ("writer", 6) if store == "local" else ("encode", 6)
    assert [p for p in paths if p[0] in ("writer", "encode")] == [first, ("encode", 2)]


#: A stored chunk's framing damaged: chain, byte flipped, the error's words.
FRAMING_DAMAGE = {
    "zlib Adler-32": ("numcodecs.zlib", -1, "zlib Adler-32 mismatch"),
    "zlib header": ("numcodecs.zlib", 1, "not a zlib stream"),
    "crc32c": ("zstd+crc32c", -1, "crc32c mismatch"),
}


@pytest.mark.parametrize("gpu", [False, pytest.param(True, marks=pytest.mark.gpu)])
@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("damage", list(FRAMING_DAMAGE))
def test_damaged_framing_is_an_error_in_the_readers_words(tmp_path, damage, store, gpu, paths):
    # The reader (local) and the stored-chunk path (memory) share one
    # framing check in Rust, on the host and on the GPU (which checks the
    # Adler-32 of the decoded bytes where they are).
    chain, at, words = FRAMING_DAMAGE[damage]
    partly_written(tmp_path / "a", chain, np.s_[:], fill_value=0, seed=9)
    chunk = tmp_path / "a" / "c" / "1" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[at] ^= 0x01
    chunk.write_bytes(bytes(raw))
    source = in_store(tmp_path / "a", store)
    if gpu:
        cupy_or_skip()
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu() if gpu else nullcontext():
        array = zarr.open_array(source, mode="r")
        codec = re.escape(f" ({chain.split('+')[0]})") if store == "memory" else ""
        with pytest.raises(zarrs_nvcomp.DecodeError, match=rf"chunk c/1/0{codec} .*{words}"):
            array[...]
    if store == "memory":
        assert any(p[0] == "engine" for p in paths), paths


@pytest.mark.parametrize("store", ["local", "memory"])
def test_arrays_read_through_the_pipeline_pickle_with_its_verdicts(tmp_path, store, paths):
    # zarr pickles an array with its codec pipeline, whose cached chain
    # verdicts hold the Rust classification: pickled as the metadata.
    reference = partly_written(tmp_path / "a", "zstd+crc32c", np.s_[:30], fill_value=0, seed=4)
    with zarr.config.set(PIPELINE):
        array = zarr.open_array(in_store(tmp_path / "a", store), mode="r")
        np.testing.assert_array_equal(array[...], reference)
        again = pickle.loads(pickle.dumps(array))
        np.testing.assert_array_equal(again[...], reference)
    if store == "memory":
        assert [p for p in paths if p[0] == "engine"] == [("engine", 6)] * 2, paths


#: Chains with element filters, which stored chunks have undone in Rust:
#: name, dtype and zarr.create_array's arguments.
FILTERED = {
    "big-endian": ("<f4", dict(serializer=zarr.codecs.BytesCodec(endian="big"))),
    "v3 delta": ("<i4", dict(filters=[zarr.codecs.numcodecs.Delta(dtype="<i4")])),
    "v2 delta": ("<i4", dict(filters=numcodecs.Delta(dtype="<i4"), zarr_format=2)),
}


@pytest.mark.parametrize("gpu", [False, pytest.param(True, marks=pytest.mark.gpu)])
@pytest.mark.parametrize("chain", list(FILTERED))
def test_stored_chunks_of_filtered_chains_read_in_batches(chain, gpu, paths):
    # zarr's own pipeline (zarr 3.4) reads big-endian chunks into GPU
    # buffers without swapping them back: the stored-chunk path undoes the
    # swap and the delta itself, on either device, in one call.
    dtype, create = FILTERED[chain]
    data = (np.arange(48 * 40) % 977).astype(dtype).reshape(48, 40)
    if dtype == "<f4":
        data /= 8
    store = zarr.storage.MemoryStore()
    compressors = numcodecs.Zstd(level=1) if create.get("zarr_format") == 2 else [ZstdCodec()]
    z = create_like(store, data, chunks=(16, 16), compressors=compressors, **create)
    z[...] = data
    if gpu:
        cp = cupy_or_skip()
    with zarr.config.set(PIPELINE), zarr.config.enable_gpu() if gpu else nullcontext():
        got = zarr.open_array(store, mode="r")[...]
    np.testing.assert_array_equal(cp.asnumpy(got) if gpu else got, data)
    assert [p for p in paths if p[0] == "engine"] == [("engine", 9)], paths
