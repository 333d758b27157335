"""zarr makes an array's codec pipeline on every open; the reader's open of
the array is kept across them while zarr's metadata of the array is
unchanged, and made again once it changes."""

from __future__ import annotations

import numpy as np
import zarr
from zarr.codecs import GzipCodec, ZstdCodec

import zarrs_nvcomp.reader

PIPELINE = {"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"}


def counting_opens(monkeypatch) -> list[str]:
    """The URLs of the reader's opens of arrays (the pipeline's awaited ones)."""
    opened: list[str] = []
    real = zarrs_nvcomp.open_array_async

    async def open_array_async(url, options=None):
        opened.append(url)
        return await real(url, options)

    monkeypatch.setattr(zarrs_nvcomp, "open_array_async", open_array_async)
    return opened


def test_reopening_an_unchanged_array_keeps_the_readers_open(tmp_path, monkeypatch):
    path = tmp_path / "a.zarr"
    data = np.arange(64 * 32, dtype="<f4").reshape(64, 32)
    z = zarr.create_array(
        path, shape=data.shape, chunks=(16, 32), dtype=data.dtype, compressors=[ZstdCodec()]
    )
    z[...] = data
    opened = counting_opens(monkeypatch)
    with zarr.config.set(PIPELINE):
        for _ in range(3):
            np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)
    assert len(opened) == 1


def test_an_array_rewritten_with_other_metadata_is_opened_again(tmp_path, monkeypatch):
    path = tmp_path / "a.zarr"
    shape, chunks = (64, 32), (16, 32)
    first = np.arange(64 * 32, dtype="<f4").reshape(shape)
    zarr.create_array(path, shape=shape, chunks=chunks, dtype="<f4", compressors=[ZstdCodec()])[
        ...
    ] = first
    opened = counting_opens(monkeypatch)
    with zarr.config.set(PIPELINE):
        np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], first)
        # The same shape, another data type and codec: the kept open
        # would decode the new chunks as the old ones.
        second = (np.arange(64 * 32, dtype="<i2") % 1000).reshape(shape)
        zarr.create_array(
            path, shape=shape, chunks=chunks, dtype="<i2", compressors=[GzipCodec()], overwrite=True
        )[...] = second
        got = zarr.open_array(path, mode="r")[...]
        assert got.dtype == second.dtype
        np.testing.assert_array_equal(got, second)
    assert len(opened) == 2
