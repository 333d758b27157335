"""Metadata documents as zarr-python writes them and as an adversary does:
bare ``NaN``/``Infinity`` (Python's ``json``) open as zarr-python opens them;
documents larger than ``max_metadata_size`` are refused from their size,
unread; a ``zarr.json`` that is ``/dev/zero`` or nested 100,000 levels deep
is a package error, not ``MemoryError`` or ``RecursionError``; a codec chain
that does not fit its array is refused when the array is opened, as
zarr-python refuses it, not when a chunk is written."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_memory_bounds import MiB, run_child

import zarrs_nvcomp
from zarrs_nvcomp import InvalidArgumentError, ZarrsNvcompError

GiB = 1 << 30


def v3_metadata(fill_value) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [6],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"missing": float("nan"), "range": [float("-inf"), float("inf")]},
    }


def write_with_bare_non_finite(path: Path, name: str, document: dict) -> None:
    text = json.dumps(document, allow_nan=True)
    assert "NaN" in text and '"NaN"' not in text  # bare, as Python's json writes it
    (path / name).write_text(text)


@pytest.mark.parametrize("fill", [float("nan"), float("inf"), float("-inf")])
def test_v3_bare_non_finite_fill_value_and_attributes_open_as_in_zarr_python(tmp_path, fill):
    path = tmp_path / "a.zarr"
    path.mkdir()
    write_with_bare_non_finite(path, "zarr.json", v3_metadata(fill))
    (path / "c").mkdir()
    (path / "c" / "0").write_bytes(np.arange(3, dtype="<f4").tobytes())
    ours = zarrs_nvcomp.open_array(str(path)).read(device="cpu")
    theirs = zarr.open_array(str(path), mode="r")[:]
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, [0, 1, 2, fill, fill, fill])


def v2_metadata(**fields) -> dict:
    """A ``.zarray`` of six float64 elements in chunks of three, with ``fields``."""
    return {
        "zarr_format": 2,
        "shape": [6],
        "chunks": [3],
        "dtype": "<f8",
        "compressor": None,
        "filters": None,
        "fill_value": 0,
        "order": "C",
    } | fields


def test_v2_bare_nan_fill_value_and_attributes_open_as_in_zarr_python(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    write_with_bare_non_finite(path, ".zarray", v2_metadata(fill_value=float("nan")))
    write_with_bare_non_finite(path, ".zattrs", {"scale": float("nan"), "top": float("inf")})
    (path / "0").write_bytes(np.arange(3, dtype="<f8").tobytes())
    ours = zarrs_nvcomp.open_array(str(path)).read(device="cpu")
    np.testing.assert_array_equal(ours, zarr.open_array(str(path), mode="r")[:])
    assert ours[:3].tolist() == [0, 1, 2] and all(math.isnan(v) for v in ours[3:])


def write_array(path: Path) -> None:
    zarr.create_array(str(path), shape=(6,), chunks=(3,), dtype="f4", fill_value=0)


def open_in_child(path: Path) -> dict:
    """Opens ``path`` in a child of 1 GiB more address space (a regression
    aborts or fails there, not in pytest); its error and peak growth."""
    return run_child(
        f"""
        report(measure(lambda: zarrs_nvcomp.open_array({str(path)!r}) and None))
        """,
        address_space_extra=1 << 30,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("zarr_format", "name"), [(3, "zarr.json"), (2, ".zarray"), (2, ".zattrs")]
)
def test_sparse_20_gib_metadata_is_refused_unread(tmp_path, zarr_format, name):
    # Was an abort ("memory allocation of 21474836480 bytes failed") or MemoryError.
    path = tmp_path / "a.zarr"
    zarr.create_array(str(path), shape=(6,), chunks=(3,), dtype="f4", zarr_format=zarr_format)
    with open(path / name, "ab") as document:
        document.truncate(20 * GiB)
    out = open_in_child(path)
    assert "InvalidArgumentError" in out["classes"], out
    assert name in out["result"] and "max_metadata_size" in out["result"], out
    assert out["peak_growth"] < 64 * MiB, out
    with pytest.raises(InvalidArgumentError, match=rf"{name}.*max_metadata_size"):
        zarrs_nvcomp.open_array(str(path))


def test_max_metadata_size_is_a_storage_option(tmp_path):
    path = tmp_path / "a.zarr"
    write_array(path)
    size = (path / "zarr.json").stat().st_size
    zarrs_nvcomp.open_array(str(path), storage_options={"max_metadata_size": size})
    with pytest.raises(InvalidArgumentError, match=rf"{size} bytes.*{size - 1} bytes"):
        zarrs_nvcomp.open_array(str(path), storage_options={"max_metadata_size": size - 1})
    with pytest.raises(InvalidArgumentError, match="max_metadata_size"):
        zarrs_nvcomp.open_array(str(path), storage_options={"max_metadata_size": "0"})


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_zarr_json_that_is_dev_zero_is_a_package_error(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    (path / "zarr.json").symlink_to("/dev/zero")
    # Was a MemoryError after 2.6 GB, read by the group check of a local path.
    out = open_in_child(path)
    assert "ZarrsNvcompError" in out["classes"], out
    assert out["peak_growth"] < 128 * MiB, out


def test_deeply_nested_zarr_json_is_a_package_error(tmp_path):
    path = tmp_path / "a.zarr"
    write_array(path)
    document = (path / "zarr.json").read_text()
    depth = 100_000
    nested = "[" * depth + "]" * depth
    (path / "zarr.json").write_text(
        document.replace('"attributes": {}', f'"attributes": {{"x": {nested}}}')
    )
    assert nested in (path / "zarr.json").read_text()
    with pytest.raises(ZarrsNvcompError):
        zarrs_nvcomp.open_array(str(path))


def test_transpose_of_another_dimensionality_is_refused_at_open(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    metadata = v3_metadata(0)
    metadata["codecs"] = [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        {"name": "bytes", "configuration": {"endian": "little"}},
    ]
    (path / "zarr.json").write_text(json.dumps(metadata, allow_nan=True))
    with pytest.raises(InvalidArgumentError, match=r"codecs.*transpose"):
        zarrs_nvcomp.open_array(str(path))


def test_v2_delta_of_another_dtype_is_refused_at_open(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    zarray = v2_metadata(filters=[{"id": "delta", "dtype": "<i4"}])
    (path / ".zarray").write_text(json.dumps(zarray))
    with pytest.raises(InvalidArgumentError, match=r"codecs.*delta"):
        zarrs_nvcomp.open_array(str(path))
