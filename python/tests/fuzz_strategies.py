"""Hypothesis strategies for the entry-point fuzz (``test_fuzz_entry_points.py``,
``fuzz/entry_points.py``): zarr v2 and v3 metadata, mostly valid and then
mutated; storage options and read, write and codec options with hostile
values; selections; codec configurations and bytes.

Every strategy draws plain data (dicts, lists, numbers, bytes, slices), so
that a case's ``repr`` is its reproducer.
"""

from __future__ import annotations

import copy

import numpy as np
from conftest import ALL_ALGORITHMS, BLOSC_LZ4_SHUFFLE
from hypothesis import strategies as st

#: Values that break a field of any type: wrong types, huge, negative,
#: zero, non-finite, empty and nested.
HOSTILE = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        -1,
        1,
        2,
        -(2**63),
        2**31,
        2**32 + 1,
        2**63 - 1,
        2**63,
        2**64,
        2**70,
        0.5,
        -0.0,
        1e300,
        float("nan"),
        float("inf"),
        "",
        "x",
        "1",
        "-1",
        "1e300",
        "NaN",
        "true",
        "\x00",
        "é/../..",
        [],
        [1],
        [-1, 0],
        [[1]],
        {},
        {"name": "x"},
    ]
)

#: zarr v3 data types, with some that zarrs or zarr lacks and some that are not types.
V3_DTYPES = [np.dtype(c).name for c in "?bhilBHILefdFD"]  # bool, int8, ..., complex128
V3_DTYPES += ["r8", "r24", "string", "bytes", "float8_e4m3", "int2", "uint4", "datetime64"]
V3_DTYPES += ["numpy.datetime64", "x"]
#: zarr v2 dtypes (NumPy's typestr), with odd ones.
V2_DTYPES = ["|b1", "|i1", "<i2", ">i4", "<i8", "|u1", ">u2", "<u4", "<f2", "<f4", ">f8"]
V2_DTYPES += ["<c8", "|S4", "<U2", "|V3", "<M8[ns]", "|O", "<f16", "i4", "", "<i0"]


def json_scalars() -> st.SearchStrategy:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**65), 2**65),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
    )


def json_values(max_leaves: int = 6) -> st.SearchStrategy:
    return st.recursive(
        json_scalars(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def small_shapes(max_dims: int = 3, max_side: int = 12) -> st.SearchStrategy:
    """Shapes of 1 to ``max_dims`` axes (0-d ones come from mutations)."""
    return st.lists(st.integers(0, max_side), min_size=1, max_size=max_dims)


@st.composite
def chunk_shapes(draw, shape: list[int]) -> list[int]:
    return [draw(st.integers(1, max(1, n))) for n in shape]


def fill_values(dtype: str) -> st.SearchStrategy:
    if dtype.startswith(("float", "<f", ">f", "complex", "<c")):
        return st.one_of(
            st.floats(allow_nan=True, width=32),
            st.sampled_from(["NaN", "Infinity", "-Infinity", "0x7fc00000"]),
        )
    if dtype in ("bool", "|b1"):
        return st.booleans()
    return st.integers(-3, 300)


CODECS_V3_COMPRESSORS = [
    {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
    {"name": "gzip", "configuration": {"level": 1}},
    {"name": "crc32c"},
    BLOSC_LZ4_SHUFFLE,
    {"name": "nvcomp_batch", "configuration": {"algorithm": "lz4", "options": {}}},
    {"name": "nvcomp_batch", "configuration": {"algorithm": "zstd", "options": {}}},
    {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
    {"name": "numcodecs.zlib", "configuration": {"level": 1}},
    {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
    {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
    {
        "name": "numcodecs.fixedscaleoffset",
        "configuration": {"offset": 0, "scale": 10, "dtype": "<f8"},
    },
    {"name": "bz2", "configuration": {"level": 1}},
    {"name": "no_such_codec", "configuration": {}},
]


@st.composite
def v3_metadata(draw) -> dict:
    """zarr.json of an array: valid in structure, most often mutated."""
    shape = draw(small_shapes())
    dtype = draw(st.sampled_from(V3_DTYPES[:12]) | st.sampled_from(V3_DTYPES))
    codecs: list = [
        {"name": "bytes", "configuration": {"endian": draw(st.sampled_from(["little", "big"]))}}
    ]
    if shape and draw(st.booleans()):
        order = list(range(len(shape)))
        codecs.insert(
            0, {"name": "transpose", "configuration": {"order": draw(st.permutations(order))}}
        )
    codecs += draw(st.lists(st.sampled_from(CODECS_V3_COMPRESSORS), max_size=2))
    chunks = draw(chunk_shapes(shape))
    # Sharded, sometimes twice over (shards of shards).
    outer = chunks
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        inner = [draw(st.integers(1, c)) for c in outer]
        codecs = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": inner,
                    "codecs": codecs,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": draw(st.sampled_from(["end", "start", "middle"])),
                },
            }
        ]
        outer = inner
    separator = draw(st.sampled_from(["/", "/", ".", "", "//", "x"]))
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {
            "name": draw(st.sampled_from(["default", "v2"])),
            "configuration": {"separator": separator},
        },
        "fill_value": draw(fill_values(dtype)),
        "codecs": codecs,
        "attributes": draw(attributes()),
    }
    return draw(mutated(meta))


def attributes() -> st.SearchStrategy:
    """Attributes as zarr-python writes them: non-finite floats are bare
    ``NaN``, ``Infinity`` and ``-Infinity`` once ``json.dumps`` writes them."""
    non_finite = st.sampled_from([float("nan"), float("inf"), float("-inf")])
    return st.one_of(
        st.just({}),
        st.dictionaries(st.sampled_from(["scale", "range", "x"]), non_finite, max_size=2),
        st.fixed_dictionaries({"range": st.lists(non_finite, max_size=3)}),
    )


@st.composite
def v2_metadata(draw) -> dict:
    """.zarray of an array: valid in structure, most often mutated."""
    shape = draw(small_shapes())
    dtype = draw(st.sampled_from(V2_DTYPES[:11]) | st.sampled_from(V2_DTYPES))
    compressor = draw(
        st.sampled_from(
            [
                None,
                {"id": "zlib", "level": 1},
                {"id": "lz4", "acceleration": 1},
                {"id": "zstd", "level": 1},
                {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 1, "blocksize": 0},
                {"id": "gzip", "level": 1},
                {"id": "nvcomp_batch", "algorithm": "lz4", "options": {}},
                {"id": "nvcomp_batch", "algorithm": "deflate"},
                {"id": "no_such_codec"},
            ]
        )
    )
    filters = draw(
        st.sampled_from(
            [
                None,
                [],
                [{"id": "delta", "dtype": "<i4"}],
                [{"id": "shuffle", "elementsize": 4}],
                [
                    {
                        "id": "fixedscaleoffset",
                        "offset": 1,
                        "scale": 3,
                        "dtype": "<f8",
                        "astype": "<i4",
                    }
                ],
                [{"id": "no_such_filter"}],
            ]
        )
    )
    meta = {
        "zarr_format": 2,
        "shape": shape,
        "chunks": draw(chunk_shapes(shape)),
        "dtype": dtype,
        "compressor": compressor,
        "fill_value": draw(st.one_of(st.none(), fill_values(dtype))),
        "order": draw(st.sampled_from(["C", "F", "X"])),
        "filters": filters,
        "dimension_separator": draw(st.sampled_from([".", ".", "/", "x"])),
    }
    return draw(mutated(meta))


def _paths(obj, prefix=()):
    """Every path to a value inside ``obj`` (dict keys, list indices)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw, obj):
    """``obj`` (JSON) with up to three of its values replaced by hostile ones,
    deleted, or joined by an unknown key."""
    obj = copy.deepcopy(obj)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.integers(0, 5))
        if action == 0 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == 1 and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=5))] = draw(json_values())
        elif action == 2:
            parent[path[-1]] = draw(json_values())
        else:
            # A copy: HOSTILE's lists and dicts are shared, and a later
            # mutation may edit inside this one.
            parent[path[-1]] = copy.deepcopy(draw(HOSTILE))
    return obj


#: object_store keys (and fsspec spellings the package translates).
STORAGE_KEYS = [
    "max_metadata_size",
    "timeout",
    "connect_timeout",
    "max_retries",
    "retry_timeout",
    "allow_http",
    "skip_signature",
    "region",
    "endpoint",
    "access_key_id",
    "anon",
    "key",
    "secret",
    "client_kwargs",
    "endpoint_url",
    "use_listings_cache",
    "no_such_option",
]


def storage_options() -> st.SearchStrategy:
    values = st.one_of(HOSTILE, st.text(max_size=6), st.integers(-(2**70), 2**70), json_values(3))
    return st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(STORAGE_KEYS), values, max_size=3),
        st.dictionaries(st.text(max_size=4), values, max_size=2),
        HOSTILE,
    )


def read_options() -> st.SearchStrategy:
    """Keyword arguments of ``Array.read`` (some unknown)."""
    return st.fixed_dictionaries(
        {},
        optional={
            "device": st.one_of(
                st.sampled_from([None, "cpu", "cuda", "cuda:1", "auto", "gpu", "", "cpu:0"]),
                HOSTILE,
            ),
            "max_concurrent_requests": st.one_of(st.integers(-2, 64), HOSTILE),
            "trusted_input": st.one_of(st.booleans(), HOSTILE),
            "max_decoded_size": st.one_of(st.integers(-1, 1 << 20), HOSTILE),
            "progress": st.sampled_from([None, False, 0]),
        },
    )


def _index() -> st.SearchStrategy:
    ints = st.one_of(
        st.integers(-20, 20), st.sampled_from([2**31, -(2**63), 2**63, 2**70, -(2**70)])
    )
    np_ints = ints.filter(lambda i: -(2**63) <= i < 2**63).map(np.int64)
    bounds = st.one_of(st.none(), ints, np_ints)
    slices = st.builds(
        slice, bounds, bounds, st.one_of(st.none(), ints.filter(bool), np_ints.filter(bool))
    )
    odd = st.sampled_from([None, True, 1.5, "0", [0, 1], np.bool_(True), np.uint8(1)])
    return st.one_of(ints, np_ints, slices, st.just(Ellipsis), st.just(slice(None)), odd)


def selections() -> st.SearchStrategy:
    """Basic-indexing selections, of any length, some invalid."""
    return st.one_of(_index(), st.lists(_index(), max_size=5).map(tuple))


ALGORITHMS = [*ALL_ALGORITHMS, "LZ4", "lz5", ""]


def codec_options() -> st.SearchStrategy:
    keys = st.sampled_from(
        ["data_type", "algorithm", "level", "chunk_size", "type", "num_RLEs", "x", "backend"]
    )
    return st.one_of(
        st.none(),
        st.dictionaries(keys, st.one_of(HOSTILE, st.text(max_size=6)), max_size=2),
        HOSTILE,
    )


def codec_kwargs() -> st.SearchStrategy:
    """``NvCompBatchCodec`` keyword arguments (device never the GPU of the CI)."""
    return st.fixed_dictionaries(
        {"algorithm": st.one_of(st.sampled_from(ALGORITHMS), HOSTILE)},
        optional={
            "options": codec_options(),
            "device": st.sampled_from([None, "cpu", "cuda", "cuda:7", "tpu", 3]),
            "trusted_input": st.one_of(st.booleans(), HOSTILE),
            "max_decoded_size": st.one_of(st.none(), st.integers(0, 1 << 20), HOSTILE),
            "device_outputs": st.sampled_from(["cupy", "views", "numpy", 1]),
        },
    )


def payloads() -> st.SearchStrategy:
    """Buffers to encode: bytes, some repetitive, some NumPy arrays."""
    raw = st.one_of(st.binary(max_size=300), st.binary(max_size=8).map(lambda b: b * 200))
    return st.lists(st.one_of(raw, raw.map(lambda b: np.frombuffer(b, np.uint8))), max_size=4)
