"""create_array is all-or-nothing: everything it is given is checked before
anything is written, so a bad compressor, or an algorithm this machine
cannot encode, leaves whatever was there as it was; arrays are created (and
written and read) at ``memory://`` URLs, at paths and ``file://`` URLs whose
names hold spaces, ``#``, ``?``, ``%`` or non-ASCII letters (file URLs taken
as written, as zarr takes them), and in 0 dimensions."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import NvCompBatchCodec

# Each is refused by the codec that the metadata names, once opened.
BAD_COMPRESSORS = [
    pytest.param({"id": "nope"}, id="unknown-id"),
    pytest.param({"name": "nope", "configuration": {}}, id="unknown-name"),
    pytest.param({"id": "zstd", "level": "fast"}, id="zstd-level-text"),
    pytest.param({"id": "zstd", "level": 1.5}, id="zstd-level-fraction"),
    pytest.param({"id": "blosc", "cname": "nope", "clevel": 5, "shuffle": 1}, id="blosc-cname"),
    pytest.param({"id": "nvcomp_batch", "algorithm": "nope"}, id="nvcomp-algorithm"),
]


def _files(root) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressor", BAD_COMPRESSORS)
def test_a_bad_compressor_leaves_the_array_there_as_it_was(
    tmp_path, compressor, zarr_format
) -> None:
    path = tmp_path / "a.zarr"
    array = zarrs_nvcomp.create_array(
        str(path), shape=(6, 4), dtype="int32", chunks=(3, 4), zarr_format=zarr_format
    )
    data = np.arange(24, dtype=np.int32).reshape(6, 4)
    array[...] = data
    before = _files(path)
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match=r"nope|level|compressor"):
        zarrs_nvcomp.create_array(
            str(path),
            shape=(6, 4),
            dtype="int32",
            chunks=(3, 4),
            compressor=compressor,
            zarr_format=zarr_format,
            overwrite=True,
        )
    assert _files(path) == before
    np.testing.assert_array_equal(zarrs_nvcomp.read_chunks_parallel(str(path)), data)


def test_a_bad_compressor_makes_no_directory(tmp_path) -> None:
    path = tmp_path / "new" / "a.zarr"
    with pytest.raises(zarrs_nvcomp.InvalidArgumentError, match="nope"):
        zarrs_nvcomp.create_array(
            str(path), shape=(4,), dtype="f4", chunks=(2,), compressor={"id": "nope"}
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("algorithm", ["cascaded", "bitcomp", "ans"])
def test_gpu_only_algorithms_are_refused_without_a_gpu(tmp_path, algorithm) -> None:
    reason = zarrs_nvcomp.gpu_unavailable_reason(0)
    if reason is None:
        pytest.skip("a GPU is usable here: GPU-only algorithms are created")
    path = tmp_path / "g.zarr"
    with pytest.raises(zarrs_nvcomp.GpuUnavailableError, match=f"{algorithm} needs a CUDA GPU"):
        zarrs_nvcomp.create_array(
            str(path),
            shape=(8,),
            dtype="uint8",
            chunks=(4,),
            compressor=NvCompBatchCodec(algorithm),
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_memory_url_keeps_its_array_for_the_process(zarr_format) -> None:
    url = f"memory://w-{uuid.uuid4().hex}/a.zarr"
    zarrs_nvcomp.create_array(
        url, shape=(5, 6), dtype="float64", chunks=(2, 4), zarr_format=zarr_format, fill_value=-1
    )
    data = np.arange(30, dtype=np.float64).reshape(5, 6)
    assert zarrs_nvcomp.write_chunks_parallel(url, data) == (6, 0)
    np.testing.assert_array_equal(zarrs_nvcomp.read_chunks_parallel(url), data)
    array = zarrs_nvcomp.open_array(url)
    array[1:3, 2:5] = 0.5
    data[1:3, 2:5] = 0.5
    np.testing.assert_array_equal(array[...], data)
    # Another name holds no array.
    with pytest.raises(zarrs_nvcomp.StoreError):
        zarrs_nvcomp.open_array(f"memory://w-{uuid.uuid4().hex}")


ODD_NAMES = ["a b.zarr", "h#1.zarr", "q?x.zarr", "ü ñ.zarr", "100%.zarr", "p%20q.zarr"]


@pytest.mark.parametrize("spelling", ["path", "file-url", "as_uri"])
@pytest.mark.parametrize("name", ODD_NAMES)
def test_odd_local_names_are_created_written_and_read_there(tmp_path, name, spelling) -> None:
    url = {
        "path": str(tmp_path / name),
        "file-url": f"file://{tmp_path / name}",
        # Percent-encoded: a file URL is taken as written, as fsspec and zarr
        # take it, so this names the directory of the encoded text.
        "as_uri": (tmp_path / name).as_uri(),
    }[spelling]
    path = tmp_path / (url.removeprefix("file://").rsplit("/", 1)[1])
    array = zarrs_nvcomp.create_array(url, shape=(4, 4), dtype="uint16", chunks=(2, 2))
    data = np.arange(16, dtype=np.uint16).reshape(4, 4) + 1
    array[...] = data
    assert zarrs_nvcomp.write_chunks_parallel(url, data, device="cpu") == (4, 0)
    np.testing.assert_array_equal(zarrs_nvcomp.read_chunks_parallel(url), data)
    # zarr finds it at the same URL.
    np.testing.assert_array_equal(zarr.open_array(url, mode="r")[...], data)
    # Everything is in the directory of that name, nothing beside it.
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert (path / "zarr.json").is_file() and (path / "c" / "1" / "1").is_file()


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    "compressor", ["zstd", {"id": "blosc", "cname": "lz4", "clevel": 1, "shuffle": 1}, None]
)
def test_a_0d_array_is_written_and_read(tmp_path, zarr_format, compressor) -> None:
    path = str(tmp_path / "scalar.zarr")
    array = zarrs_nvcomp.create_array(
        path,
        shape=(),
        dtype="float32",
        chunks=(),
        compressor=compressor,
        zarr_format=zarr_format,
        fill_value=0,
    )
    assert zarrs_nvcomp.write_chunks_parallel(path, 2.5) == (1, 0)
    assert zarrs_nvcomp.read_chunks_parallel(path).shape == ()
    assert float(zarrs_nvcomp.read_chunks_parallel(path)) == 2.5
    array[()] = np.float32(-4)
    assert float(array[()]) == -4
    array[...] = 0  # the fill value: the chunk is deleted
    assert float(array[...]) == 0


@pytest.mark.parametrize("old_format", [2, 3])
@pytest.mark.parametrize("new_format", [2, 3])
def test_an_array_there_is_replaced_only_with_overwrite(tmp_path, old_format, new_format) -> None:
    path = tmp_path / "o.zarr"
    old = zarrs_nvcomp.create_array(
        str(path), shape=(8, 8), dtype="int32", chunks=(4, 4), zarr_format=old_format
    )
    data = np.arange(64, dtype=np.int32).reshape(8, 8) + 1
    old[...] = data
    before = _files(path)
    with pytest.raises(zarrs_nvcomp.ContainsArrayError, match="already holds a zarr") as raised:
        zarrs_nvcomp.create_array(
            str(path), shape=(8, 8), dtype="float32", chunks=(4, 4), zarr_format=new_format
        )
    assert isinstance(raised.value, ValueError)
    assert _files(path) == before
    new = zarrs_nvcomp.create_array(
        str(path),
        shape=(8, 8),
        dtype="float32",
        chunks=(4, 4),
        zarr_format=new_format,
        fill_value=-1,
        overwrite=True,
    )
    # Not one byte of the int32 chunks comes back as float32.
    np.testing.assert_array_equal(new[...], np.full((8, 8), -1, dtype=np.float32))
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], new[...])
    assert sorted(_files(path)) == [".zarray" if new_format == 2 else "zarr.json"]


def test_a_group_there_is_not_replaced_without_overwrite(tmp_path) -> None:
    path = tmp_path / "g.zarr"
    zarr.open_group(str(path), mode="w")
    with pytest.raises(zarrs_nvcomp.ContainsGroupError, match="group"):
        zarrs_nvcomp.create_array(str(path), shape=(4,), dtype="uint8", chunks=(2,))
    assert zarr.open_group(str(path), mode="r") is not None
    zarrs_nvcomp.create_array(str(path), shape=(4,), dtype="uint8", chunks=(2,), overwrite=True)
    assert zarr.open_array(str(path), mode="r").shape == (4,)
