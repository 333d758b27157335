"""Which zarr codec chains the codec pipeline decodes in batches, and how.

The same chains as the Rust reader's (``src/reader/chain.rs``): ``bytes``
(little endian, or one-byte elements) then one compressor with a batched
decoder, optionally followed by ``crc32c`` (zarr v3); or a v2 array without
filters whose compressor is one of them.

| metadata | compressor | engine configuration | framing |
|---|---|---|---|
| ``nvcomp_batch`` | its configuration | the same | — |
| ``zstd``, ``numcodecs.zstd`` | Zstandard frames | ``zstd`` | — |
| ``gzip``, ``numcodecs.gzip`` | one gzip member | ``gzip`` | — |
| ``lz4`` (v2), ``numcodecs.lz4`` | numcodecs LZ4 | ``lz4`` with its 4-byte header | — |
| ``zlib`` (v2), ``numcodecs.zlib`` | zlib stream | ``deflate`` | 2-byte header, Adler-32 trailer |
| ``blosc``, ``numcodecs.blosc`` | blosc chunks | none: the reader's blosc decoder | — |

Blosc chains with ``cname`` ``lz4``, ``lz4hc``, ``zstd``, ``zlib`` or
``snappy`` are decoded by the reader's batched blosc decoder (each chunk's
header says how it decodes); ``blosclz`` has no GPU decoder and stays on
zarr's pipeline, as in the reader. Blosc chains are read in batches only:
zarr's pipeline writes them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrs_nvcomp._zarrs_nvcomp import DecodeError, normalize_config

__all__ = ["BatchedChain", "ChainFraming", "classify"]

#: Blosc compressors with batched decoders (``blosclz`` has none).
_BLOSC_CNAMES = {"lz4", "lz4hc", "zstd", "zlib", "snappy"}

#: Engine configurations of the standard compressors, by codec name.
_STANDARD = {
    "zstd": {"algorithm": "zstd"},
    "gzip": {"algorithm": "gzip"},
    "lz4": {"algorithm": "lz4", "options": {"has_header": True}},
    "zlib": {"algorithm": "deflate"},
}


@dataclass(frozen=True)
class ChainFraming:
    """What surrounds the compressed stream in a stored chunk."""

    #: A CRC-32C of the rest follows, 4 bytes little endian (v3 ``crc32c``).
    crc32c: bool = False
    #: A zlib stream: a 2-byte header, then raw DEFLATE, then the Adler-32
    #: (big endian) of the decoded bytes.
    zlib: bool = False

    def body(self, chunk: np.ndarray, key: str, codec: str) -> np.ndarray:
        """The compressed stream inside ``chunk`` (a flat ``uint8`` array),
        after checking its CRC-32C; ``DecodeError`` naming ``key`` otherwise."""
        if self.crc32c:
            if chunk.nbytes < 4:
                raise DecodeError(f"chunk {key} ({codec}): shorter than its crc32c checksum")
            stored = int.from_bytes(chunk[-4:].tobytes(), "little")
            chunk = chunk[:-4]
            computed = _crc32c(chunk)
            if stored != computed:
                raise DecodeError(
                    f"chunk {key} ({codec}): crc32c mismatch: stored {stored:#010x}, "
                    f"computed {computed:#010x}"
                )
        if self.zlib:
            if (
                chunk.nbytes < 6
                or (int(chunk[0]) << 8 | int(chunk[1])) % 31
                or chunk[0] & 0x0F != 8
            ):
                raise DecodeError(f"chunk {key} ({codec}): not a zlib stream")
            chunk = chunk[2:-4]
        return chunk

    def frame(self, body: bytes, decoded: np.ndarray) -> bytes:
        """A stored chunk of the compressed stream ``body`` of ``decoded``
        (flat ``uint8``): what :meth:`body` takes apart."""
        if self.zlib:
            # Deflate with a 32 KiB window, default level; then the Adler-32.
            body = b"\x78\x9c" + body + zlib.adler32(decoded).to_bytes(4, "big")
        if self.crc32c:
            body += _crc32c(np.frombuffer(body, dtype=np.uint8)).to_bytes(4, "little")
        return body

    def adler32(self, chunk: np.ndarray) -> int | None:
        """The Adler-32 trailer of a zlib ``chunk`` (whose :meth:`body` was
        taken), None for other chunks."""
        if not self.zlib:
            return None
        tail = chunk[:-4] if self.crc32c else chunk
        return int.from_bytes(tail[-4:].tobytes(), "big")

    def check_decoded(self, chunk: np.ndarray, decoded: np.ndarray, key: str, codec: str) -> None:
        """Checks the Adler-32 trailer of a zlib ``chunk`` against its host
        ``decoded`` bytes, in the words of the engine's check of device
        results (``decode_host_to_device``'s ``adler32``)."""
        stored = self.adler32(chunk)
        if stored is None:
            return
        computed = zlib.adler32(decoded)
        if stored != computed:
            raise DecodeError(
                f"chunk {key} ({codec}) of the batch cannot be decoded: zlib Adler-32 "
                f"mismatch: stored {stored:#010x}, decoded data has {computed:#010x}"
            )


@dataclass(frozen=True)
class BatchedChain:
    """A chain decoded in batches: the engine configuration (JSON), the
    framing of each chunk, and what the chunk's bytes hold."""

    #: The engine's configuration, normalized, as JSON; None for blosc
    #: chunks, which the reader's blosc decoder decodes.
    config_json: str | None
    #: The compressor's name, for error messages.
    codec: str
    framing: ChainFraming
    #: zarr v2 (memory order and byte order come from the array's metadata).
    v2: bool
    #: The ``bytes`` codec's byte order (v3); None for one-byte elements.
    endian: str | None = "little"

    @property
    def encodes(self) -> bool:
        """Whether the engine also encodes the chain (not blosc)."""
        return self.config_json is not None

    def chunk_dtype(self, spec: Any) -> np.dtype | None:
        """The NumPy dtype of a decoded chunk of ``spec`` (a zarr ``ArraySpec``),
        or None where the batched path cannot read it (variable-size, object
        or structured elements, or a byte order other than this machine's)."""
        try:
            dtype = np.dtype(spec.dtype.to_native_dtype())
        except (TypeError, ValueError):
            return None
        if dtype.hasobject or dtype.fields is not None or dtype.itemsize == 0:
            return None
        if not self.v2 and self.endian is not None and dtype.itemsize > 1:
            dtype = dtype.newbyteorder("<" if self.endian == "little" else ">")
        if dtype.itemsize > 1 and not dtype.isnative:
            return None
        return dtype


def classify(codecs: Iterable[Any]) -> tuple[BatchedChain | None, str | None]:
    """The batched chain of zarr codec objects, or None and the reason why
    zarr's pipeline must decode them."""
    codecs = list(codecs)
    if len(codecs) == 1 and type(codecs[0]).__name__ == "V2Codec":
        return _classify_v2(codecs[0])
    try:
        metas = [c.to_dict() for c in codecs]
    except Exception as e:
        return None, f"a codec without metadata: {e}"
    names = [m.get("name") for m in metas]
    if not names or names[0] != "bytes":
        return None, f"codec chain {names} does not start with bytes"
    endian = (metas[0].get("configuration") or {}).get("endian")
    rest = metas[1:]
    framing = ChainFraming()
    if rest and rest[-1].get("name") == "crc32c":
        rest = rest[:-1]
        framing = ChainFraming(crc32c=True)
    if len(rest) != 1:
        return None, f"bytes-to-bytes chain {names[1:]} is not one compressor"
    name = str(rest[0]["name"])
    configuration = rest[0].get("configuration") or {}
    if name.removeprefix("numcodecs.") == "blosc":
        reason = _blosc_reason(configuration)
        if reason is not None:
            return None, reason
        return BatchedChain(None, name, framing, v2=False, endian=endian), None
    config = _engine_config(name.removeprefix("numcodecs."), configuration)
    if config is None:
        return None, f"codec {name!r} has no batched decoder"
    if name.endswith("zlib"):
        framing = ChainFraming(crc32c=framing.crc32c, zlib=True)
    return BatchedChain(config, name, framing, v2=False, endian=endian), None


def _classify_v2(codec: Any) -> tuple[BatchedChain | None, str | None]:
    if codec.filters:
        return None, "zarr v2 filters"
    if codec.compressor is None:
        return None, "uncompressed chunks"
    meta = dict(codec.compressor.get_config())
    name = str(meta.pop("id"))
    if name == "blosc":
        reason = _blosc_reason(meta)
        if reason is not None:
            return None, reason
        return BatchedChain(None, name, ChainFraming(), v2=True), None
    config = _engine_config(name, meta)
    if config is None:
        return None, f"compressor {name!r} has no batched decoder"
    return BatchedChain(config, name, ChainFraming(zlib=name == "zlib"), v2=True), None


def _blosc_reason(configuration: dict[str, Any]) -> str | None:
    """Why blosc chunks of ``configuration`` go through zarr's pipeline, or
    None where they are batched (numcodecs' default ``cname`` is ``lz4``)."""
    cname = configuration.get("cname", "lz4")
    if cname in _BLOSC_CNAMES:
        return None
    if cname == "blosclz":
        return "blosc cname 'blosclz' has no GPU decoder"
    return f"blosc cname {cname!r} has no batched decoder"


def _engine_config(name: str, configuration: dict[str, Any]) -> str | None:
    """The engine's normalized configuration of a compressor as JSON text
    (hashable, so that engines are cached by it), or None."""
    if name == "nvcomp_batch":
        stored = {k: v for k, v in configuration.items() if k != "id"}
        return json.dumps(normalize_config(stored, stored=True), sort_keys=True)
    if name in _STANDARD:
        return json.dumps(normalize_config(_STANDARD[name]), sort_keys=True)
    return None


def _crc32c(data: np.ndarray) -> int:
    # zarr's own crc32c codec depends on google_crc32c.
    import google_crc32c

    return int(google_crc32c.value(data))
