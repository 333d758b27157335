"""Arrays read through kerchunk reference sets: ``reference://`` URLs with
fsspec's storage options (``fo`` a JSON file or a dict, ``remote_options``),
chunks packed in one file at byte offsets as a NetCDF4/HDF5 file holds
them, read as zarr reads the same set through fsspec; and sets whose
references ``gen`` entries make."""

from __future__ import annotations

import json
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import InvalidArgumentError, UnsupportedTypeError

DATA = (np.arange(40 * 30, dtype="<f4").reshape(40, 30) % 97) / 7


def packed_set(tmp_path: Path, filters=None) -> tuple[dict, Path]:
    """A zarr v2 zlib array's reference set (version 0), its chunks packed
    after a header in one container file, the last chunk missing; the set
    and where its JSON is."""
    z = zarr.create_array(
        str(tmp_path / "orig.zarr"), shape=DATA.shape, chunks=(8, 7), dtype="<f4",
        zarr_format=2, compressors=numcodecs.Zlib(level=1), filters=filters,
    )  # fmt: skip
    z[:] = DATA
    container = tmp_path / "container.nc"
    refs: dict = {}
    packed = bytearray(b"a header the references skip")
    for f in sorted((tmp_path / "orig.zarr").iterdir()):
        if f.name.startswith("."):
            refs[f.name] = f.read_text()
        elif f.name != "4.4":
            chunk = f.read_bytes()
            refs[f.name] = [str(container), len(packed), len(chunk)]
            packed += chunk
    container.write_bytes(bytes(packed))
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    return refs, path


def expected() -> np.ndarray:
    out = DATA.copy()
    out[32:, 28:] = 0  # the missing chunk: the fill value
    return out


SHUFFLE = [numcodecs.Shuffle(elementsize=4)]


@pytest.mark.parametrize("filters", [None, SHUFFLE], ids=["zlib", "shuffle"])
def test_a_packed_set_reads_as_zarr_reads_it(tmp_path, filters):
    _, path = packed_set(tmp_path, filters)
    options = {"fo": str(path)}
    got = zarrs_nvcomp.read_chunks_parallel("reference://", storage_options=options, device="cpu")
    through_fsspec = zarr.open_array("reference://", storage_options=options, mode="r")[:]
    np.testing.assert_array_equal(through_fsspec, expected())
    np.testing.assert_array_equal(got, expected())
    opened = zarrs_nvcomp.open_array("reference://", storage_options={"fo": path})
    np.testing.assert_array_equal(opened.read((slice(3, 30), 5), device="cpu"), expected()[3:30, 5])


def test_a_set_given_as_a_dict_with_bytes_and_remote_options(tmp_path):
    refs, _ = packed_set(tmp_path)
    container, offset, length = refs["0.0"]
    refs["0.0"] = Path(container).read_bytes()[offset : offset + length]
    nested = {"version": 1, "refs": {f"g/{k}": v for k, v in refs.items()}}
    options = {"fo": nested, "remote_protocol": "file", "remote_options": {"timeout": "10s"}}
    got = zarrs_nvcomp.read_chunks_parallel("reference://g", storage_options=options, device="cpu")
    np.testing.assert_array_equal(got, expected())


def test_options_the_reader_cannot_follow_are_refused(tmp_path):
    _, path = packed_set(tmp_path)
    read = zarrs_nvcomp.read_chunks_parallel
    with pytest.raises(InvalidArgumentError, match="needs storage_options"):
        read("reference://", storage_options={}, device="cpu")
    with pytest.raises(UnsupportedTypeError, match="local files"):
        read("reference://", storage_options={"fo": str(path), "target_protocol": "s3"})
    with pytest.raises(InvalidArgumentError, match="unknown storage options"):
        read("reference://", storage_options={"fo": str(path), "endpoint": "x"})
    with pytest.raises(UnsupportedTypeError, match="'fo' must be"):
        read("reference://", storage_options={"fo": 3})
    (tmp_path / "bad.json").write_text('{"a": ["u", 1]}')
    with pytest.raises(zarrs_nvcomp.ZarrsNvcompError, match='key "a"'):
        read("reference://", storage_options={"fo": str(tmp_path / "bad.json")})


def test_gen_entries_make_the_chunk_references(tmp_path):
    """A version-1 set whose chunk references come from a ``gen`` entry, as
    kerchunk's reference specification defines it (an array of
    uncompressed chunks, each 224 bytes, back to back after a header): the
    array reads whole. (fsspec 2026.9's ``ReferenceFileSystem`` leaves
    ``gen`` out: it is no peer here.)"""
    z = zarr.create_array(
        str(tmp_path / "orig.zarr"), shape=DATA.shape, chunks=(8, 7), dtype="<f4",
        zarr_format=2, compressors=None,
    )  # fmt: skip
    z[:] = DATA
    header = b"sixteen bytes..."
    container = tmp_path / "container.bin"
    chunks = [
        (tmp_path / "orig.zarr" / f"{i}.{j}").read_bytes() for i in range(5) for j in range(5)
    ]
    assert {len(c) for c in chunks} == {224}
    container.write_bytes(header + b"".join(chunks))
    meta = {f.name: f.read_text() for f in (tmp_path / "orig.zarr").iterdir() if f.name[0] == "."}
    refs = {
        "version": 1,
        "templates": {"f": str(container)},
        "gen": [
            {
                "key": "{{i}}.{{j}}",
                "url": "{{f}}",
                "offset": "{{ 16 + (i * 5 + j) * 224 }}",
                "length": "224",
                "dimensions": {"i": {"stop": 5}, "j": [0, 1, 2, 3, 4]},
            }
        ],
        "refs": meta,
    }
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    got = zarrs_nvcomp.read_chunks_parallel(
        "reference://", storage_options={"fo": str(path)}, device="cpu"
    )
    np.testing.assert_array_equal(got, DATA)
