"""zarr-python's codec pipeline on the batched path.

``NvcompCodecPipeline`` is a zarr 3 codec pipeline: set it once and every
read of an array whose chain the chunk-parallel reader decodes in batches
decodes all chunks of the read in batches: on the GPU into GPU memory when
zarr's buffers are GPU buffers (``zarr.config.enable_gpu()``), else on the
CPU in parallel. Which chains those are is the reader's classifier's
verdict (``classify_chain``, in Rust): ``bytes`` (either byte order) then
``zstd``, ``gzip``, numcodecs ``lz4``/``zlib``, ``nvcomp_batch`` or
``blosc`` but for its ``blosclz``, optionally ``crc32c``, behind
``transpose``, numcodecs ``delta``, ``fixedscaleoffset`` or ``bitround``;
v2 arrays of those compressors and filters, in either order and byte
order; and sharded arrays of such inner chains.

Arrays in stores the reader opens by URL (zarr's ``LocalStore``,
``FsspecStore`` over S3, ``ObjectStore``) are read by one call of the
chunk-parallel reader, with its own object_store fetch, when the selection
is a box of strided ranges: every batched chain, sharded arrays' whole
shards included, in the reader's one engine call per wave. Otherwise the
chunks are fetched concurrently through zarr's store API and decoded in one
engine call (blosc chunks: one call of the reader's blosc decoder) where
the chain has at most a ``transpose`` besides its compressor; other
filters, big-endian chunks and shards read that way go through zarr's
default ``BatchedCodecPipeline`` (inside a sharded array, the shards' inner
chunks decoded in batches shard by shard). Writes encode all chunks of the
write in one engine call on the CPU (chunks written in part are read,
decoded in one call and merged first) for the chains the engine decodes
here; blosc arrays and the other chains are written by zarr's pipeline::

    import zarr
    zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"})
    with zarr.config.enable_gpu():
        block = zarr.open_array("data.zarr")[:]    # a CuPy array, decoded on the GPU

A chunk that cannot be decoded raises `zarrs_nvcomp.DecodeError`
naming its key and codec.
"""

from __future__ import annotations

import asyncio
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
from zarrs_nvcomp._batched_chain import BatchedChain, classify
from zarrs_nvcomp._batched_write import write_batched
from zarrs_nvcomp._engine_batch import chunk_key, decode_stored
from zarrs_nvcomp._opened_arrays import UNREADABLE, open_for_pipeline
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
    module's documentation. The reader's classifier decides, for each chunk
    spec, which chain is decoded in batches (`chain_for`)."""

    #: zarr's default pipeline of the same codecs: chains without a
    #: batched decoder.
    fallback: BatchedCodecPipeline
    #: The array's metadata, where zarr gave it (the array's pipeline, not a
    #: shard's): what lets a read request become one call of the reader.
    metadata: ArrayMetadata | None = field(default=None, compare=False, repr=False)
    #: The array's chunk spec, where zarr gave its metadata.
    spec: ArraySpec | None = field(default=None, compare=False, repr=False)
    #: The classifier's verdicts, by chunk spec.
    _chains: dict[tuple[Any, ...], tuple[BatchedChain | None, str | None]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        return cls(fallback=BatchedCodecPipeline.from_codecs(tuple(codecs), batch_size=batch_size))

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: ArrayMetadata, store: Store) -> Self:
        from zarr.codecs._v2 import V2Codec
        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype

        v2 = array_metadata.zarr_format == 2
        grid = getattr(array_metadata, "chunk_grid", None)
        chunk_shape = array_metadata.chunks if v2 else getattr(grid, "chunk_shape", None)
        spec = ArraySpec(
            shape=chunk_shape or (1,) * len(array_metadata.shape),
            dtype=array_metadata.dtype if v2 else array_metadata.data_type,
            fill_value=array_metadata.fill_value,
            config=ArrayConfig.from_dict({"order": array_metadata.order} if v2 else {}),
            prototype=default_buffer_prototype(),
        )
        if v2:
            codecs = [V2Codec(filters=array_metadata.filters, compressor=array_metadata.compressor)]
        else:
            # Evolved against the chunk's spec, as zarr does (zarr 3.1's
            # metadata holds them evolved already; later releases' not).
            codecs = [c.evolve_from_array_spec(array_spec=spec) for c in array_metadata.codecs]
        fallback = BatchedCodecPipeline.from_codecs(codecs)
        return cls(fallback, metadata=array_metadata, spec=spec)

    def chain_for(self, spec: ArraySpec) -> tuple[BatchedChain | None, str | None]:
        """The chain of chunks of ``spec`` decoded in batches, or None and
        the reason zarr's pipeline decodes them: the reader's verdict."""
        key = (str(spec.dtype), tuple(spec.shape), spec.order)
        verdict = self._chains.get(key)
        if verdict is None:
            verdict = self._chains[key] = classify(list(self.fallback), spec)
        return verdict

    @property
    def batched(self) -> BatchedChain | None:
        """The array's batched chain (None: zarr's pipeline decodes it, or
        this pipeline is a shard's, classified per chunk spec)."""
        return None if self.spec is None else self.chain_for(self.spec)[0]

    @property
    def fallback_reason(self) -> str | None:
        """Why zarr's pipeline decodes the array's chunks, or None."""
        return None if self.spec is None else self.chain_for(self.spec)[1]

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
        chain = self.chain_for(items[0][1])[0] if items else None
        dtype = (
            chain.chunk_dtype(items[0][1]) if chain is not None and chain.encodes_stored else None
        )
        if dtype is None:
            await self.fallback.write(items, value, drop_axes)
            return
        if not await self._write_with_writer(items, value.as_ndarray_like(), drop_axes):
            await write_batched(chain, dtype, items, value, drop_axes)

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
        chain = self.chain_for(items[0][1])[0] if items else None
        if chain is None:
            return await self.fallback.read(items, out, drop_axes)
        target = out.as_ndarray_like()
        reads_missing = getattr(items[0][1].config, "read_missing_chunks", True) is not False
        if self.metadata is not None and reads_missing and not drop_axes:
            request = reader_request(items, self.metadata, target.shape)
            if request is not None and await self._read_with_reader(request, target, chain.codec):
                return get_results([True] * len(items))
        dtype = chain.chunk_dtype(items[0][1]) if chain.decodes_stored else None
        if dtype is None:
            # Filters only the reader undoes, or chunks it cannot reach: zarr's
            # pipeline (inside a shard, batched shard by shard).
            return await self.fallback.read(items, out, drop_axes)
        fetched = await asyncio.gather(
            *(getter.get(prototype=_fetch_prototype(getter, spec)) for getter, spec, *_ in items)
        )
        await _decode_and_place(chain, dtype, items, fetched, target, drop_axes)
        return get_results([chunk is not None for chunk in fetched])

    async def _write_with_writer(self, items: list[Any], value: Any, drop_axes: tuple) -> bool:
        """Writes ``value`` (NumPy, or CuPy under ``enable_gpu()``) to the
        chunks of ``items`` with one awaited write of the writer, which
        merges partly covered chunks, encodes every chunk in one batch on the
        value's side (the GPU for device values: no copy to the host) and
        stores them concurrently, where the chunks lie in a store it opens
        by URL and the selection is a box of unit-step ranges; False,
        writing nothing, otherwise."""
        if self.metadata is None or drop_axes:
            return False
        request = reader_request(items, self.metadata, value.shape)
        if request is None or any(isinstance(s, slice) and s.step != 1 for s in request.selection):
            return False
        from zarrs_nvcomp import open_array_async

        array = await open_for_pipeline(
            request.url, request.options, self.metadata, open_array_async
        )
        if array is UNREADABLE or array.batched_algorithm is None:
            return False
        empty = bool(items[0][1].config.write_empty_chunks)
        await array.write_async(value, request.selection, write_empty_chunks=empty)
        return True

    async def _read_with_reader(self, request: ReaderRequest, out: Any, codec: str) -> bool:
        """Reads ``request`` with one awaited read of the reader into ``out``
        (NumPy, or CuPy on the current device), decoding straight into it
        where it is C-contiguous (zarr's output of arrays of order C),
        through a copy of the reader's result otherwise; False, reading
        nothing, where the reader cannot open the array or would not decode
        its chunks in batches. The open and the read are the library's own
        tasks: no thread waits for them."""
        from zarrs_nvcomp import open_array_async

        array = await open_for_pipeline(
            request.url, request.options, self.metadata, open_array_async
        )
        if array is UNREADABLE or array.batched_algorithm is None:
            return False
        on_device = not isinstance(out, np.ndarray)
        device = f"cuda:{_buffers.cupy_module().cuda.Device().id}" if on_device else "cpu"
        try:
            if out.flags.c_contiguous and out.dtype == array.dtype:
                # Decoded straight into zarr's output: no result to copy.
                await array.read_async(request.selection, device=device, out=out)
            else:
                out[...] = await array.read_async(request.selection, device=device)
        except DecodeError as e:
            raise DecodeError(f"{e} (codec {codec}, array {request.url})") from None
        return True


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


async def _decode_and_place(
    chain: BatchedChain,
    dtype: np.dtype,
    items: list[ReadItem],
    fetched: list[Buffer | None],
    out: Any,
    drop_axes: tuple[int, ...],
) -> None:
    """Decodes the fetched chunks in one awaited engine call and copies each
    one's selection into ``out`` (NumPy or CuPy); missing chunks read as the
    fill value."""
    present = [i for i, chunk in enumerate(fetched) if chunk is not None]
    decoded = await decode_stored(
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
