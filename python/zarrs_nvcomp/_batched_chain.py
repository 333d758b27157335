"""The reader's verdict on a zarr codec chain, as the codec pipeline uses it.

Which chains decode in batches is decided once, in Rust, by the reader's
classifier (``classify_chain``, over ``src/array/chain/``): the codec
pipeline batches exactly the chains `zarrs_nvcomp.read_chunks_parallel`
batches. Local arrays are read by the reader itself. The chunks zarr's
store API fetches are decoded in batches by the reader's stored-chunk
decoder (framing, checksums, sizes, the byte swap and ``delta`` handled in
Rust, the order of dimensions applied here as a view) unless the array is
sharded or has a ``fixedscaleoffset``; zarr's pipeline decodes those.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError, StoredChain, classify_chain

__all__ = ["BatchedChain", "classify"]


class BatchedChain:
    """A chain the reader decodes in batches: the classifier's verdict
    (`StoredChain`, which decodes and encodes stored chunks, framing
    and checksums included, in Rust), and what the pipeline reads of it."""

    __slots__ = ("verdict",)

    def __init__(self, verdict: StoredChain) -> None:
        self.verdict = verdict

    @property
    def codec(self) -> str:
        """The compressor's name in the metadata, for error messages."""
        return self.verdict.codec or ""

    @property
    def decodes_stored(self) -> bool:
        """Whether stored chunks fetched through zarr's store API decode here
        in batches; otherwise only the reader batches the chain."""
        return self.verdict.decodes_stored

    @property
    def encodes_stored(self) -> bool:
        """Whether chunks encode here in batches."""
        return self.verdict.encodes_stored

    @property
    def order(self) -> tuple[int, ...] | None:
        """The chunk's dimensions in stored order; None for C order."""
        order = self.verdict.order
        return None if order is None else tuple(order)

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

    def stored_bytes(self, chunk: np.ndarray) -> np.ndarray:
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
    chain = BatchedChain(verdict["chain"])
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
