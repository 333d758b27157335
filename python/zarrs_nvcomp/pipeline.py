"""zarr-python's codec pipeline on the batched path.

``NvcompCodecPipeline`` is a zarr 3 codec pipeline: set it once and every
read of an array whose chain this project decodes in batches (``bytes`` then
``zstd``, ``gzip``, numcodecs ``lz4``/``zlib``, ``nvcomp_batch`` or
``blosc`` but for its ``blosclz``, optionally ``crc32c``; v2 arrays with one
of those compressors and no filters) decodes all chunks of the read in
batches: on the GPU into GPU memory when zarr's buffers are GPU buffers
(``zarr.config.enable_gpu()``), else on the CPU in parallel. Arrays in
stores the reader opens by URL (zarr's ``LocalStore``, ``FsspecStore`` over
S3, ``ObjectStore``) are read by one call of the chunk-parallel reader, with
its own object_store fetch, when the selection is a box of strided ranges;
otherwise the chunks are fetched concurrently through zarr's store API and
decoded in one engine call (blosc chunks: one call of the reader's blosc
decoder). Writes encode all chunks of the write in one engine call on the
CPU (chunks written in part are read, decoded in one call and merged first);
blosc arrays are written by zarr's pipeline. Other chains go through zarr's
default ``BatchedCodecPipeline``; inside a sharded array, the shards' inner
chunks are decoded and encoded in batches shard by shard::

    import zarr
    zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"})
    with zarr.config.enable_gpu():
        block = zarr.open_array("data.zarr")[:]    # a CuPy array, decoded on the GPU

A chunk that cannot be decoded raises :class:`zarrs_nvcomp.DecodeError`
naming its key and codec.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import CodecPipeline
from zarr.core.buffer import cpu
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.registry import register_pipeline
from zarr.storage import StorePath

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._batched_write import write_batched
from zarrs_nvcomp._chain import BatchedChain, classify
from zarrs_nvcomp._engine_batch import chunk_key, decode_stored
from zarrs_nvcomp._reader_request import ReaderRequest, reader_request
from zarrs_nvcomp._zarr_compat import fill_value_or_default, get_results
from zarrs_nvcomp._zarrs_nvcomp import DecodeError

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.codec import Codec
    from zarr.abc.store import ByteGetter, ByteSetter, Store
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.indexing import SelectorTuple
    from zarr.core.metadata import ArrayMetadata

__all__ = ["NvcompCodecPipeline"]

#: One chunk of a read: where its bytes come from, its spec, the part of it
#: selected and where that part goes in the output.
ReadItem = tuple["ByteGetter", "ArraySpec", "SelectorTuple", "SelectorTuple", bool]


@dataclass(frozen=True)
class NvcompCodecPipeline(CodecPipeline):
    """zarr's codec pipeline over this project's batched decoders; see the
    module's documentation. ``batched`` is the chain decoded in batches, or
    None, with ``fallback_reason`` saying why zarr's pipeline decodes it."""

    #: zarr's default pipeline of the same codecs: chains without a
    #: batched decoder.
    fallback: BatchedCodecPipeline
    batched: BatchedChain | None
    fallback_reason: str | None
    #: The array's metadata, where zarr gave it (the array's pipeline, not a
    #: shard's): what lets a read request become one call of the reader.
    metadata: ArrayMetadata | None = field(default=None, compare=False, repr=False)
    #: Arrays opened by the reader, by URL and options.
    _opened: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        codecs = tuple(codecs)
        fallback = BatchedCodecPipeline.from_codecs(codecs, batch_size=batch_size)
        batched, reason = classify(codecs)
        return cls(fallback=fallback, batched=batched, fallback_reason=reason)

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: ArrayMetadata, store: Store) -> Self:
        from zarr.codecs._v2 import V2Codec
        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype

        if array_metadata.zarr_format == 2:
            codecs = [V2Codec(filters=array_metadata.filters, compressor=array_metadata.compressor)]
        else:
            # Evolved against the chunk's spec, as zarr does (zarr 3.1's
            # metadata holds them evolved already; later releases' not).
            grid = array_metadata.chunk_grid
            spec = ArraySpec(
                shape=getattr(grid, "chunk_shape", (1,) * len(array_metadata.shape)),
                dtype=array_metadata.data_type,
                fill_value=array_metadata.fill_value,
                config=ArrayConfig.from_dict({}),
                prototype=default_buffer_prototype(),
            )
            codecs = [c.evolve_from_array_spec(array_spec=spec) for c in array_metadata.codecs]
        pipeline = cls.from_codecs(codecs)
        return cls(pipeline.fallback, pipeline.batched, pipeline.fallback_reason, array_metadata)

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        return type(self).from_codecs(
            (c.evolve_from_array_spec(array_spec=array_spec) for c in self.fallback),
            batch_size=self.fallback.batch_size,
        )

    def __iter__(self) -> Iterator[Codec]:
        return iter(self.fallback)

    @property
    def supports_partial_decode(self) -> bool:
        return self.fallback.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self.fallback.supports_partial_encode

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGrid,
    ) -> None:
        self.fallback.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self.fallback.compute_encoded_size(byte_length, array_spec)

    async def decode(
        self, chunk_bytes_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        return await self.fallback.decode(chunk_bytes_and_specs)

    async def encode(
        self, chunk_arrays_and_specs: Iterable[tuple[NDBuffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        return await self.fallback.encode(chunk_arrays_and_specs)

    async def write(
        self,
        batch_info: Iterable[tuple[ByteSetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        items = list(batch_info)
        dtype = self._batched_dtype(items) if self.batched and self.batched.encodes else None
        if dtype is None:
            await self.fallback.write(items, value, drop_axes)
            return
        await write_batched(self.batched, dtype, items, value, drop_axes)

    async def read(
        self,
        batch_info: Iterable[ReadItem],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> Any:
        """Reads the chunks of ``batch_info`` into ``out``; returns whether
        each was present, as zarr after 3.1 expects (the reader's path, which
        fills missing chunks itself, is taken only where zarr reads missing
        chunks as fill values)."""
        items = list(batch_info)
        dtype = self._batched_dtype(items)
        if dtype is None:
            return await self.fallback.read(items, out, drop_axes)
        target = out.as_ndarray_like()
        request = None
        reads_missing = getattr(items[0][1].config, "read_missing_chunks", True) is not False
        if self.metadata is not None and reads_missing and not drop_axes and target.dtype == dtype:
            request = reader_request(items, self.metadata, target.shape)
        if request is not None and await asyncio.to_thread(self._read_with_reader, request, target):
            return get_results([True] * len(items))
        fetched = await asyncio.gather(
            *(getter.get(prototype=_fetch_prototype(getter, spec)) for getter, spec, *_ in items)
        )
        await asyncio.to_thread(
            _decode_and_place, self.batched, dtype, items, fetched, target, drop_axes
        )
        return get_results([chunk is not None for chunk in fetched])

    def _batched_dtype(self, items: list[Any]) -> np.dtype | None:
        """The dtype of the decoded chunks of ``items`` where the batched path
        reads and writes them, else None (zarr's pipeline does)."""
        if self.batched is None or not items:
            return None
        return self.batched.chunk_dtype(items[0][1])

    def _read_with_reader(self, request: ReaderRequest, out: Any) -> bool:
        """Reads ``request`` with one call of the reader into ``out`` (NumPy,
        or CuPy on the current device), decoding straight into it where it is
        C-contiguous (zarr's output of arrays of order C), through a copy of
        the reader's result otherwise; False, reading nothing, where the
        reader cannot open the array or would not decode its chunks in
        batches."""
        from zarrs_nvcomp.reader import open_array

        key = (request.url, tuple(sorted(request.options.items())))
        array = self._opened.get(key)
        if array is None or (
            array is not _UNREADABLE and array.shape != tuple(self.metadata.shape)
        ):
            try:
                array = open_array(request.url, request.options)
            except (OSError, TypeError, ValueError) as e:
                # Metadata zarr reads and zarrs does not (a v2 null fill value
                # of raw bytes, ...): zarr's store API and the engine read it.
                _log.debug("zarrs_nvcomp: the reader cannot open %s: %s", request.url, e)
                array = _UNREADABLE
            self._opened[key] = array
        if array is _UNREADABLE or array.batched_algorithm is None:
            return False
        on_device = not isinstance(out, np.ndarray)
        device = f"cuda:{_buffers.cupy_module().cuda.Device().id}" if on_device else "cpu"
        try:
            if out.flags.c_contiguous and out.dtype == array.dtype:
                # Decoded straight into zarr's output: no result to copy.
                array.read(request.selection, device=device, out=out)
            else:
                out[...] = array.read(request.selection, device=device)
        except DecodeError as e:
            raise DecodeError(f"{e} (codec {self.batched.codec}, array {request.url})") from None
        return True


#: What ``_opened`` holds for an array the reader cannot open.
_UNREADABLE = object()

_log = logging.getLogger("zarrs_nvcomp.pipeline")

# zarr finds pipelines by module and name: "zarrs_nvcomp.NvcompCodecPipeline",
# where the package exports it.
NvcompCodecPipeline.__module__ = "zarrs_nvcomp"
register_pipeline(NvcompCodecPipeline)


def _fetch_prototype(getter: Any, spec: Any) -> Any:
    """The buffer prototype to fetch a chunk in: host buffers from a store
    (the engine decodes from host bytes), the chunk's own prototype from
    anything else, since zarr's shard reader serves a shard's inner chunks
    only in the array's prototype (GPU buffers under ``enable_gpu()``)."""
    return cpu.buffer_prototype if isinstance(getter, StorePath) else spec.prototype


def _decode_and_place(
    chain: BatchedChain,
    dtype: np.dtype,
    items: list[ReadItem],
    fetched: list[Buffer | None],
    out: Any,
    drop_axes: tuple[int, ...],
) -> None:
    """Decodes the fetched chunks in one engine call and copies each one's
    selection into ``out`` (NumPy or CuPy); missing chunks read as the fill
    value."""
    present = [i for i, chunk in enumerate(fetched) if chunk is not None]
    decoded = decode_stored(
        chain,
        dtype,
        [items[i][1] for i in present],
        [fetched[i] for i in present],
        [chunk_key(items[i][0]) for i in present],
        on_device=not isinstance(out, np.ndarray),
    )
    for i, chunk in zip(present, decoded, strict=True):
        _, _, chunk_selection, out_selection, _ = items[i]
        part = chunk[chunk_selection]
        if drop_axes:
            part = part.squeeze(axis=drop_axes)
        out[out_selection] = part
    for i, chunk in enumerate(fetched):
        if chunk is None:
            _, spec, _, out_selection, _ = items[i]
            out[out_selection] = fill_value_or_default(spec)
