"""The entry-point fuzz's cases and their property (issue 29: never panic).

A case is plain data (its ``repr`` reproduces it): ``read`` writes metadata
and chunk bytes to a fresh directory, opens it and reads a selection;
``create`` creates an array, writes a selection and reads it back; ``codec``
builds an ``NvCompBatchCodec`` (or numcodecs' ``nvcomp_batch``) and round-trips
and decodes bytes. :func:`run` runs one: each call either succeeds, with
consistent results (shapes, dtypes, the bytes written read back), or raises
a :class:`zarrs_nvcomp.ZarrsNvcompError`. Anything else, a ``PanicException``
(a ``BaseException``) above all, is a :class:`Violation`. A watchdog ends the
process after :data:`CASE_TIMEOUT` seconds, and the address space is capped
at the declared output plus :data:`OVERHEAD` bytes, so that a hang or an
unbounded allocation fails loudly instead of passing.
"""

from __future__ import annotations

import faulthandler
import json
import math
import resource
import warnings
from pathlib import Path

import numpy as np
from fuzz_concurrent import ConcurrencyViolation, concurrent_cases, run_concurrent
from fuzz_strategies import (
    attributes,
    codec_kwargs,
    payloads,
    read_options,
    selections,
    small_shapes,
    storage_options,
    v2_metadata,
    v3_metadata,
)
from hypothesis import strategies as st

import zarrs_nvcomp

#: Seconds one case may take before the watchdog ends the process.
CASE_TIMEOUT = 60.0
#: Bytes a case may allocate beyond its declared output.
OVERHEAD = 1 << 30
#: Most elements a create case writes: a scalar written to billions of
#: elements is done piece by piece (whole chunks at a time), correctly but
#: for longer than :data:`CASE_TIMEOUT`; its pieces are tested on their own.
MAX_WRITE_ELEMENTS = 1 << 24


#: Data types the create cases make arrays of.
CREATE_DTYPES = ["int8", "uint16", "int32", "float32", "float64", "bool", "complex64"]


class Violation(AssertionError):
    """A call broke the property: a non-package error, or inconsistent results."""


def outcome(fn, *args, **kwargs):
    """``("ok", result)``, or ``("err", error)`` for a package error; any
    other exception (``BaseException`` too) is a :class:`Violation`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn(*args, **kwargs)
    except zarrs_nvcomp.ZarrsNvcompError as e:
        return "err", e
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        name = getattr(fn, "__qualname__", repr(fn))
        raise Violation(f"{name} raised {type(e).__module__}.{type(e).__qualname__}: {e}") from e


# --- cases ------------------------------------------------------------------------


@st.composite
def read_cases(draw) -> dict:
    version = draw(st.sampled_from([2, 3]))
    meta = draw(v3_metadata() if version == 3 else v2_metadata())
    return {
        "kind": "read",
        "metadata": meta if draw(st.integers(0, 19)) != 13 else draw(st.text(max_size=20)),
        # How the metadata document is stored (see _write_metadata).
        "form": draw(st.sampled_from(["plain"] * 7 + ["deep", "huge", "dev-zero"])),
        "zattrs": draw(st.one_of(st.none(), attributes())),
        "chunk": draw(st.one_of(st.binary(max_size=64), st.just("exact"))),
        "url": draw(st.sampled_from(["path", "path", "file"])),
        "storage_options": draw(st.one_of(st.none(), st.none(), st.none(), storage_options())),
        "selection": draw(selections()),
        "read_options": draw(read_options()),
    }


@st.composite
def create_cases(draw) -> dict:
    shape = draw(small_shapes(max_dims=3, max_side=10))
    create = {
        "shape": shape,
        "dtype": draw(st.sampled_from(CREATE_DTYPES)),
        "chunks": [draw(st.integers(1, max(1, n))) for n in shape],
        "compressor": draw(
            st.sampled_from(["zstd", "gzip", "lz4", "zlib", None, {"id": "zstd", "level": 3}])
        ),
        "zarr_format": draw(st.sampled_from([3, 3, 2])),
        "fill_value": draw(st.sampled_from([0, 1, -1, 0.5, float("nan")])),
    }
    if create["zarr_format"] == 3 and draw(st.booleans()):
        create["shards"] = [c * draw(st.integers(1, 2)) for c in create["chunks"]]
    if draw(st.integers(0, 3)) == 3:
        create = draw(_hostile_create(create))
    return {
        "kind": "create",
        "create": create,
        "selection": draw(selections()),
        "value": draw(
            st.one_of(st.integers(-300, 300), st.floats(allow_nan=False, width=32), st.booleans())
        ),
        "via": draw(st.sampled_from(["setitem", "function"])),
        "write_options": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "device": st.sampled_from([None, "cpu", "cuda"]),
                    "write_empty_chunks": st.booleans(),
                    "max_concurrent_requests": st.integers(1, 8),
                },
            )
        ),
    }


@st.composite
def _hostile_create(draw, create: dict) -> dict:
    from fuzz_strategies import HOSTILE

    key = draw(st.sampled_from(sorted(create)))
    return {**create, key: draw(HOSTILE)}


@st.composite
def codec_cases(draw) -> dict:
    return {
        "kind": "codec",
        "kwargs": draw(codec_kwargs()),
        "via": draw(st.sampled_from(["class", "numcodecs"])),
        "payloads": draw(payloads()),
        "garbage": draw(st.lists(st.binary(max_size=200), max_size=3)),
        "flips": draw(st.lists(st.integers(0, 10_000), max_size=3)),
    }


def all_cases() -> st.SearchStrategy:
    """Every kind of case: reads, creates and writes, the codec, and
    concurrent writers and readers of one array."""
    return st.one_of(read_cases(), create_cases(), codec_cases(), concurrent_cases())


# --- running ----------------------------------------------------------------------


def run(case: dict, tmp: Path) -> str:
    """Runs ``case`` in the empty directory ``tmp`` under the watchdog and the
    memory cap; returns ``"ok"`` or the package error's class name."""
    faulthandler.dump_traceback_later(CASE_TIMEOUT, exit=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # Capped below what setrlimit takes: a declared output of 2**63 bytes is no cap.
    cap = min(_address_space() + declared_output(case) + OVERHEAD, 1 << 62)
    resource.setrlimit(
        resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard)
    )
    try:
        runs = {
            "read": _run_read,
            "create": _run_create,
            "codec": _run_codec,
            "concurrent": run_concurrent,
        }
        try:
            return runs[case["kind"]](case, tmp)
        except ConcurrencyViolation as e:
            raise Violation(str(e)) from e
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        faulthandler.cancel_dump_traceback_later()


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def declared_output(case: dict) -> int:
    """The bytes a case's result may take: its selection of the array (or the
    codec's payloads) at 16 bytes an element, 0 when not computable."""
    if case["kind"] == "codec":
        return 2 * sum(len(bytes(p)) for p in case["payloads"])
    shape = (
        case["metadata"].get("shape")
        if case["kind"] == "read" and isinstance(case["metadata"], dict)
        else None
    )
    if case["kind"] in ("create", "concurrent"):
        shape = case["create"].get("shape")
    if case["kind"] == "concurrent":
        return 16 * math.prod(shape) * (len(case["writes"]) + 2)
    try:
        return 16 * math.prod(_expected_shape(shape, case["selection"]))
    except Exception:
        return 0


def _expected_shape(shape, selection) -> tuple[int, ...]:
    """NumPy's shape of ``selection`` of an array of ``shape``."""
    return np.broadcast_to(np.empty((), np.uint8), tuple(shape))[selection].shape


def _check_read(array, result, selection, what: str) -> None:
    try:
        expected = _expected_shape(array.shape, selection)
    except Exception as e:
        raise Violation(f"{what} took {selection!r}, which NumPy rejects: {e!r}") from e
    if tuple(result.shape) != expected or result.dtype != array.dtype:
        raise Violation(
            f"{what}: {result.shape} {result.dtype}, "
            f"expected {expected} {array.dtype} for {selection!r}"
        )


def _run_read(case: dict, tmp: Path) -> str:
    meta = case["metadata"]
    path = tmp / "a.zarr"
    path.mkdir()
    name = "zarr.json" if isinstance(meta, dict) and meta.get("zarr_format") == 3 else ".zarray"
    _write_metadata(path / name, meta, case.get("form", "plain"))
    if case.get("zattrs") is not None:
        (path / ".zattrs").write_text(json.dumps(case["zattrs"]))
    _write_chunks(path, meta, case["chunk"])
    url = str(path) if case["url"] == "path" else path.as_uri()
    kind, array = outcome(zarrs_nvcomp.open_array, url, case["storage_options"])
    if kind == "err":
        return type(array).__name__
    kind, result = outcome(array.read, case["selection"], **case["read_options"])
    if kind == "err":
        return type(result).__name__
    _check_read(array, _host(result), case["selection"], "read")
    return "ok"


def _write_metadata(path: Path, meta, form: str) -> None:
    """The metadata document at ``path``: ``meta`` as Python's ``json`` writes
    it (bare ``NaN``), nested 100,000 levels deeper (``deep``), padded to a
    sparse 20 GiB (``huge``), or a link to ``/dev/zero``."""
    if form == "dev-zero":
        path.symlink_to("/dev/zero")
        return
    text = json.dumps(meta) if isinstance(meta, dict) else meta
    if form == "deep" and text.endswith("}"):
        text = text[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path.write_text(text)
    if form == "huge":
        with open(path, "r+b") as f:
            f.truncate(20 << 30)


def _write_chunks(path: Path, meta, chunk) -> None:
    """The first chunk's file under the key its metadata names: ``chunk``'s
    bytes, or (``"exact"``) as many random bytes as 16-byte elements of a
    chunk take, up to 1 MiB."""
    try:
        shape = meta.get("chunks") or meta["chunk_grid"]["configuration"]["chunk_shape"]
        n = max(0, math.prod(int(s) for s in shape) * 16)
        ndim = len(shape)
    except Exception:
        n, ndim = 64, 2
    data = np.random.default_rng(n).bytes(min(n, 1 << 20)) if chunk == "exact" else chunk
    try:
        key = _chunk_key(meta, ndim)
    except Exception:
        key = "0.0"
    target = path / key
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except (OSError, TypeError, AttributeError):
        pass  # a key the file system cannot hold: no chunk


def _chunk_key(meta: dict, ndim: int) -> str:
    """The key of the first chunk, as ``meta``'s key encoding names it."""
    if meta.get("zarr_format") == 3:
        sep = meta["chunk_key_encoding"]["configuration"]["separator"]
        return sep.join(["c", *["0"] * ndim]) if sep in ("/", ".") else "c/0"
    sep = meta.get("dimension_separator", ".")
    return (sep if sep in ("/", ".") else ".").join(["0"] * ndim) or "0"


def _host(result):
    return result if isinstance(result, np.ndarray) else np.asarray(result)


def _run_create(case: dict, tmp: Path) -> str:
    create = dict(case["create"])
    kind, array = outcome(zarrs_nvcomp.create_array, str(tmp / "c.zarr"), **create)
    if kind == "err":
        return type(array).__name__
    shape = create["shape"]
    if list(array.shape) != ([shape] if isinstance(shape, int) else list(shape)):
        raise Violation(f"create_array made shape {array.shape}, asked {create['shape']}")
    sel, value = case["selection"], case["value"]
    try:
        elements = math.prod(_expected_shape(array.shape, sel))
    except Exception:
        elements = 0  # a selection NumPy rejects: the write's error is the finding
    if elements > MAX_WRITE_ELEMENTS:
        return "too large to write in a case's time"
    if case["via"] == "setitem":
        kind, err = outcome(array.__setitem__, sel, value)
    else:
        kind, err = outcome(
            zarrs_nvcomp.write_chunks_parallel, array, value, sel, **case["write_options"]
        )
    if kind == "err":
        return type(err).__name__
    kind, back = outcome(array.read, sel, device="cpu")
    if kind == "err":
        raise Violation(f"a written selection does not read back: {back!r}")
    _check_read(array, back, sel, "read after write")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cast NumPy makes too
        want = np.broadcast_to(np.asarray(value).astype(array.dtype), back.shape)
    if not np.array_equal(back, want, equal_nan=True):
        raise Violation(f"wrote {value!r}, read back {back!r}")
    return "ok"


def _run_codec(case: dict, tmp: Path) -> str:
    kwargs = case["kwargs"]
    if case["via"] == "class":
        kind, codec = outcome(zarrs_nvcomp.NvCompBatchCodec, **kwargs)
    else:
        import numcodecs

        config = {
            "id": "nvcomp_batch",
            **{k: v for k, v in kwargs.items() if k in ("algorithm", "options")},
        }
        kind, codec = outcome(numcodecs.get_codec, config)
    if kind == "err":
        return type(codec).__name__
    bufs = case["payloads"]
    kind, encoded = outcome(codec.encode_batch, bufs)
    if kind == "err":
        return type(encoded).__name__
    encoded = [bytes(memoryview(e)) for e in encoded]
    kind, decoded = outcome(codec.decode_batch, encoded)
    too_big = any(len(memoryview(b).cast("B")) > codec.max_decoded_size for b in bufs)
    if too_big != (kind == "err"):
        raise Violation(f"{codec!r} decoding what it encoded: {decoded!r}")
    if too_big:
        return type(decoded).__name__
    if [bytes(memoryview(d)) for d in decoded] != [bytes(memoryview(b)) for b in bufs]:
        raise Violation(f"{codec!r} round trip changed the bytes")
    corrupt = [bytearray(e) for e in encoded] + [bytearray(g) for g in case["garbage"]]
    for i, flip in enumerate(case["flips"]):
        if corrupt and corrupt[i % len(corrupt)]:
            b = corrupt[i % len(corrupt)]
            b[flip % len(b)] ^= 1 << (flip % 8)
    kind, result = outcome(codec.decode_batch, [bytes(b) for b in corrupt])
    if kind == "ok":
        limit = codec.max_decoded_size
        if len(result) != len(corrupt) or any(len(memoryview(r).cast("B")) > limit for r in result):
            raise Violation(
                f"{codec!r} decoded {len(corrupt)} buffers to {[len(r) for r in result]}"
            )
    return "ok" if kind == "ok" else type(result).__name__
