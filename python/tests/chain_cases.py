"""Arrays written by zarr-python with every codec chain the reader must open:
blosc (every cname and shuffle), sharding (index at the end and the start,
with and without crc32c, nested), transpose, big-endian bytes, crc32c, the
numcodecs filters and compressors, and zarr v2 order F.

Each case is `(id, data, create_array keyword arguments)`; `write_case`
writes it. The data are chosen so that the lossy filters (quantize, astype,
fixedscaleoffset, bitround) still round-trip through zarr-python, which is
the reference: the reader must return what zarr-python returns.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numcodecs
import numpy as np
import zarr
import zarr.codecs as zc

SHAPE = (37, 29)
CHUNKS = (8, 16)
# Every cname the installed numcodecs built (its wheels leave out snappy, which
# the Rust tests cover through c-blosc).
CNAMES = [
    c
    for c in ["lz4", "lz4hc", "blosclz", "zstd", "zlib", "snappy"]
    if c in numcodecs.blosc.list_compressors()
]
SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def sample(dtype: str, seed: int = 0) -> np.ndarray:
    """Compressible data of `dtype` and SHAPE, with some noise."""
    rng = np.random.default_rng(seed)
    ramp = np.add.outer(np.arange(SHAPE[0]), np.arange(SHAPE[1]) * 3)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(SHAPE) < 0.3
    if dtype.kind in "iu":
        return (ramp % 200 + rng.integers(0, 3, SHAPE)).astype(dtype)
    return (ramp / 7 + rng.standard_normal(SHAPE)).astype(dtype)


def _blosc_cases():
    for cname in CNAMES:
        for shuffle, code in SHUFFLES.items():
            for dtype, blocksize in [("int16", 0), ("float64", 256), ("uint8", 0)]:
                data = sample(dtype)
                typesize = data.dtype.itemsize
                yield (
                    f"v3-blosc-{cname}-{shuffle}-{dtype}-{blocksize}",
                    data,
                    {
                        "compressors": zc.BloscCodec(
                            cname=cname,
                            clevel=5,
                            shuffle=shuffle,
                            typesize=typesize,
                            blocksize=blocksize,
                        )
                    },
                )
                yield (
                    f"v2-blosc-{cname}-{shuffle}-{dtype}-{blocksize}",
                    data,
                    {
                        "zarr_format": 2,
                        "compressors": numcodecs.Blosc(
                            cname=cname, clevel=5, shuffle=code, blocksize=blocksize
                        ),
                    },
                )


def _sharding_cases():
    inner = [zc.BytesCodec(), zc.ZstdCodec(level=1)]
    yield "v3-sharded-end-crc32c", sample("int32"), {"shards": (16, 16)}
    for location in ["start", "end"]:
        for crc in [True, False]:
            index_codecs = [zc.BytesCodec(), zc.Crc32cCodec()] if crc else [zc.BytesCodec()]
            yield (
                f"v3-sharded-{location}-{'crc32c' if crc else 'nocrc'}",
                sample("int32", 1),
                {
                    "chunks": (16, 16),
                    "serializer": zc.ShardingCodec(
                        chunk_shape=(8, 8),
                        codecs=inner,
                        index_codecs=index_codecs,
                        index_location=location,
                    ),
                },
            )
    yield (
        "v3-sharded-nested",
        sample("float32", 2),
        {
            "chunks": (16, 16),
            "serializer": zc.ShardingCodec(
                chunk_shape=(8, 8),
                codecs=[zc.ShardingCodec(chunk_shape=(4, 4), codecs=inner, index_location="start")],
            ),
        },
    )
    yield (
        "v3-sharded-blosc",
        sample("uint16", 3),
        {
            "chunks": (16, 16),
            "serializer": zc.ShardingCodec(
                chunk_shape=(8, 8),
                codecs=[zc.BytesCodec(), zc.BloscCodec(cname="lz4", shuffle="shuffle")],
            ),
        },
    )


def _other_cases():
    floats, ints = sample("float64", 4), sample("int32", 5)
    yield "v3-transpose", ints, {"filters": [zc.TransposeCodec(order=(1, 0))]}
    yield "v3-big-endian", ints, {"serializer": zc.BytesCodec(endian="big")}
    yield (
        "v3-big-endian-blosc",
        floats,
        {"serializer": zc.BytesCodec(endian="big"), "compressors": zc.BloscCodec(cname="zstd")},
    )
    yield "v2-big-endian", ints.astype(">i4"), {"zarr_format": 2, "compressors": numcodecs.Zstd()}
    yield "v3-crc32c", ints, {"compressors": [zc.ZstdCodec(), zc.Crc32cCodec()]}
    yield "v3-crc32c-alone", ints, {"compressors": [zc.Crc32cCodec()]}
    yield (
        "v2-order-F-blosc",
        floats,
        {"zarr_format": 2, "order": "F", "compressors": numcodecs.Blosc(cname="lz4")},
    )
    yield (
        "v2-order-F-delta",
        ints,
        {
            "zarr_format": 2,
            "order": "F",
            "filters": [numcodecs.Delta(dtype="<i4")],
            "compressors": numcodecs.Zstd(),
        },
    )


def _numcodecs_cases():
    """(name, data, v2 filters, v2 compressor, v3 filters, v3 compressors)."""
    floats, ints = sample("float64", 6), sample("int32", 7)
    scaled = np.round(1000 + sample("float64", 8) % 25, 1)
    integral = np.round(sample("float64", 9))
    zc3 = zc.numcodecs
    return [
        ("delta", ints, [numcodecs.Delta("<i4")], None, [zc3.Delta(dtype="<i4")], None),
        (
            "delta-astype",
            sample("int64", 10),
            [numcodecs.Delta("<i8", astype="<i2")],
            None,
            [zc3.Delta(dtype="<i8", astype="<i2")],
            None,
        ),
        (
            "fixedscaleoffset",
            scaled,
            # astype u2, not u1: zarrs reads numcodecs' "|u1" as "<|u1" and fails at open
            # (test_chains.test_fixedscaleoffset_u1_fails_at_open_naming_it).
            [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<u2")],
            None,
            [zc3.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<u2")],
            None,
        ),
        (
            "shuffle",
            floats,
            [numcodecs.Shuffle(elementsize=8)],
            numcodecs.Zstd(),
            None,
            [zc3.Shuffle(elementsize=8), zc.ZstdCodec()],
        ),
        (
            "bitround",
            floats.astype("float32"),
            [numcodecs.BitRound(keepbits=10)],
            None,
            [zc3.BitRound(keepbits=10)],
            None,
        ),
        (
            "quantize",
            floats,
            [numcodecs.Quantize(digits=3, dtype="<f8")],
            None,
            [zc3.Quantize(digits=3, dtype="<f8")],
            None,
        ),
        (
            "astype",
            integral,
            [numcodecs.AsType(encode_dtype="<i2", decode_dtype="<f8")],
            None,
            [zc3.AsType(encode_dtype="<i2", decode_dtype="<f8")],
            None,
        ),
        ("packbits", sample("bool", 11), [numcodecs.PackBits()], None, [zc3.PackBits()], None),
        ("fletcher32", ints, None, numcodecs.Fletcher32(), None, [zc3.Fletcher32()]),
        ("bz2", floats, None, numcodecs.BZ2(level=5), None, [zc3.BZ2(level=5)]),
        ("lzma", floats, None, numcodecs.LZMA(), None, [zc3.LZMA()]),
        ("numcodecs-zstd", ints, None, None, None, [zc3.Zstd(level=3)]),
        ("numcodecs-blosc", ints, None, None, None, [zc3.Blosc(cname="zstd", shuffle=1)]),
    ]


def cases():
    """Every case: `(id, data, create_array keyword arguments)`."""
    yield from _blosc_cases()
    yield from _sharding_cases()
    yield from _other_cases()
    for name, data, filters2, compressor2, filters3, compressors3 in _numcodecs_cases():
        if filters2 is not None or compressor2 is not None:
            yield (
                f"v2-{name}",
                data,
                {"zarr_format": 2, "filters": filters2, "compressors": compressor2},
            )
        kwargs = {}
        if filters3 is not None:
            kwargs["filters"] = filters3
        if compressors3 is not None:
            kwargs["compressors"] = compressors3
        yield f"v3-{name}", data, kwargs


CASES = {case_id: (data, kwargs) for case_id, data, kwargs in cases()}


def write_case(root: Path, case_id: str) -> Path:
    """Writes case `case_id` under `root` with zarr-python; returns its path."""
    data, kwargs = CASES[case_id]
    return write_data(root / f"{case_id}.zarr", data, kwargs)


def write_data(path: Path, data: np.ndarray, kwargs: dict) -> Path:
    """Writes `data` at `path` with zarr-python, created with `kwargs` (and
    chunks of CHUNKS unless they say otherwise); returns the path."""
    kwargs = dict(kwargs)
    chunks = kwargs.pop("chunks", CHUNKS)
    with warnings.catch_warnings():
        # zarr-python warns that numcodecs codecs are not in the v3 specification.
        warnings.simplefilter("ignore")
        z = zarr.create_array(
            str(path), shape=data.shape, chunks=chunks, dtype=data.dtype, **kwargs
        )
        z[...] = data
    return path
