"""The reader's verdict on a zarr codec chain, as the codec pipeline uses it.

Which chains decode in batches is decided once, in Rust, by the reader's
classifier (``classify_chain``, over ``src/array/chain.rs``): the codec
pipeline batches exactly the chains :func:`zarrs_nvcomp.read_chunks_parallel`
batches. Chains with filters (``delta``, ``fixedscaleoffset``, a big-endian
``bytes`` codec) and sharded arrays are read by the reader, which undoes
them; the chunks zarr's store API fetches are decoded by the engine where
the chain has at most a ``transpose`` (or a v2 ``order: "F"``) besides its
compressor, and by zarr's pipeline otherwise.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrs_nvcomp._zarrs_nvcomp import DecodeError, InvalidArgumentError, classify_chain

__all__ = ["BatchedChain", "ChainFraming", "classify"]


@dataclass(frozen=True)
class ChainFraming:
    """What surrounds the compressed stream in a stored chunk."""

    #: A CRC-32C of the rest follows, 4 bytes little endian (v3 ``crc32c``).
    crc32c: bool = False
    #: A zlib stream: a 2-byte header, then raw DEFLATE, then the Adler-32
    #: (big endian) of the decoded bytes (the classifier's ``adler32``).
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
    """A chain the reader decodes in batches, as the classifier describes it."""

    #: The engine's configuration as JSON (hashable, so that engines are
    #: cached by it); None for blosc chunks, which the reader's blosc
    #: decoder decodes.
    config_json: str | None
    #: The compressor's name in the metadata, for error messages.
    codec: str
    framing: ChainFraming
    #: Bytes of each word stored in the other byte order; 1 for none.
    swap: int = 1
    #: A numcodecs ``delta`` or ``fixedscaleoffset`` is undone after decoding.
    element_filters: bool = False
    #: The chunk's dimensions in stored order; None for C order.
    order: tuple[int, ...] | None = None
    #: The chunks decoded in batches are inner chunks of shards.
    sharded: bool = False

    @property
    def engine_decodes(self) -> bool:
        """Whether stored chunks fetched through zarr's store API decode with
        the engine here; otherwise only the reader batches the chain."""
        return not self.sharded and self.swap == 1 and not self.element_filters

    @property
    def encodes(self) -> bool:
        """Whether the engine also encodes the chain (not blosc)."""
        return self.config_json is not None and self.engine_decodes

    def chunk_dtype(self, spec: Any) -> np.dtype | None:
        """The NumPy dtype of a decoded chunk of ``spec`` (a zarr ``ArraySpec``),
        or None where the engine path cannot read it (variable-size, object
        or structured elements, or a byte order other than this machine's)."""
        try:
            dtype = np.dtype(spec.dtype.to_native_dtype())
        except (TypeError, ValueError):
            return None
        if dtype.hasobject or dtype.fields is not None or dtype.itemsize == 0:
            return None
        if dtype.itemsize > 1 and not dtype.isnative:
            return None
        return dtype

    def chunk(self, data: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        """The decoded bytes ``data`` (NumPy or CuPy) as a chunk of ``shape``:
        a view through the strides of its stored order."""
        if self.order is None:
            return data.view(dtype).reshape(shape)
        stored = data.view(dtype).reshape([shape[axis] for axis in self.order])
        return stored.transpose(np.argsort(self.order))

    def stored(self, chunk: np.ndarray) -> np.ndarray:
        """A host chunk's elements as stored: flat bytes in its stored order."""
        if self.order is not None:
            chunk = chunk.transpose(self.order)
        return np.ascontiguousarray(chunk).reshape(-1).view(np.uint8)


def classify(codecs: list[Any], spec: Any) -> tuple[BatchedChain | None, str | None]:
    """The batched chain of zarr codec objects ``codecs`` for chunks of
    ``spec`` (a zarr ``ArraySpec``), or None and the reason why zarr's
    pipeline decodes them; the reader's classifier decides."""
    try:
        metadata = _chunk_metadata(codecs, spec)
    except Exception as e:
        return None, f"a codec without metadata: {e}"
    try:
        verdict = classify_chain(json.dumps(metadata))
    except InvalidArgumentError as e:
        return None, str(e)
    if verdict["batched"] is None:
        return None, verdict["fallback_reason"]
    framing, filters = verdict["framing"], verdict["filters"]
    config = verdict["config"]
    chain = BatchedChain(
        config_json=None if config is None else json.dumps(config, sort_keys=True),
        codec=verdict["compressor"] or verdict["batched"],
        framing=ChainFraming(crc32c=framing["crc32c"], zlib=framing["adler32"]),
        swap=filters["swap"],
        element_filters=filters["delta"] or filters["scale_offset"],
        order=None if filters["order"] is None else tuple(filters["order"]),
        sharded=verdict["sharded"],
    )
    return chain, None


def _chunk_metadata(codecs: list[Any], spec: Any) -> dict[str, Any]:
    """The metadata of an array of one chunk of ``spec`` encoded by
    ``codecs``: what the classifier reads (its fill value is the data
    type's default, which the chain does not depend on)."""
    shape = list(spec.shape)
    if len(codecs) == 1 and type(codecs[0]).__name__ == "V2Codec":
        v2 = codecs[0]
        dtype = spec.dtype.to_json(zarr_format=2)
        return {
            "zarr_format": 2,
            "shape": shape,
            "chunks": shape,
            "dtype": dtype["name"] if isinstance(dtype, dict) else dtype,
            "compressor": None if v2.compressor is None else v2.compressor.get_config(),
            "filters": [f.get_config() for f in v2.filters] if v2.filters else None,
            "order": spec.order,
            "fill_value": spec.dtype.to_json_scalar(spec.dtype.default_scalar(), zarr_format=2),
        }
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": spec.dtype.to_json(zarr_format=3),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": spec.dtype.to_json_scalar(spec.dtype.default_scalar(), zarr_format=3),
        "codecs": [c.to_dict() for c in codecs],
    }


def _crc32c(data: np.ndarray) -> int:
    # zarr's own crc32c codec depends on google_crc32c.
    import google_crc32c

    return int(google_crc32c.value(data))
