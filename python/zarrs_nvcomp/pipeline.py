"""zarr-python's codec pipeline on the batched path.

``NvcompCodecPipeline`` is a zarr 3 codec pipeline: set it once and every
read of an array whose chain this project decodes in batches (``bytes`` then
``zstd``, ``gzip``, numcodecs ``lz4``/``zlib`` or ``nvcomp_batch``, optionally
``crc32c``; v2 arrays with one of those compressors and no filters) decodes
all chunks of the read in batches: on the GPU into GPU memory when zarr's
buffers are GPU buffers (``zarr.config.enable_gpu()``), else on the CPU in
parallel. Arrays in stores the reader opens by URL (zarr's ``LocalStore``,
``FsspecStore`` over S3, ``ObjectStore``) are read by one call of the
chunk-parallel reader, with its own object_store fetch, when the selection
is a box of strided ranges; otherwise the chunks are fetched concurrently
through zarr's store API and decoded in one engine call.
Other chains, and writes, go through zarr's default
``BatchedCodecPipeline``; inside a sharded array, the shards' inner chunks
are decoded in batches shard by shard::

    import zarr
    zarr.config.set({"codec_pipeline.path": "zarrs_nvcomp.NvcompCodecPipeline"})
    with zarr.config.enable_gpu():
        block = zarr.open_array("data.zarr")[:]    # a CuPy array, decoded on the GPU

A chunk that cannot be decoded raises :class:`zarrs_nvcomp.DecodeError`
naming its key and codec.
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import CodecPipeline
from zarr.core.buffer import cpu
from zarr.core.codec_pipeline import BatchedCodecPipeline, fill_value_or_default
from zarr.registry import register_pipeline

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._chain import BatchedChain, classify
from zarrs_nvcomp._reader_request import ReaderRequest, reader_request
from zarrs_nvcomp._zarrs_nvcomp import DecodeError, Engine, decode_host_to_device

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

    #: zarr's default pipeline of the same codecs: writes, and chains
    #: without a batched decoder.
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

        if array_metadata.zarr_format == 2:
            codecs = [V2Codec(filters=array_metadata.filters, compressor=array_metadata.compressor)]
        else:
            codecs = list(array_metadata.codecs)
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
        await self.fallback.write(batch_info, value, drop_axes)

    async def read(
        self,
        batch_info: Iterable[ReadItem],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        items = list(batch_info)
        dtype = None if self.batched is None or not items else self.batched.chunk_dtype(items[0][1])
        if self.batched is None or dtype is None:
            await self.fallback.read(items, out, drop_axes)
            return
        target = out.as_ndarray_like()
        request = None
        if self.metadata is not None and not drop_axes and target.dtype == dtype:
            request = reader_request(items, self.metadata, target.shape)
        if request is not None and await asyncio.to_thread(self._read_with_reader, request, target):
            return
        fetched = await asyncio.gather(
            *(getter.get(prototype=cpu.buffer_prototype) for getter, *_ in items)
        )
        await asyncio.to_thread(
            _decode_and_place, self.batched, dtype, items, fetched, target, drop_axes
        )

    def _read_with_reader(self, request: ReaderRequest, out: Any) -> bool:
        """Reads ``request`` with one call of the reader into ``out`` (NumPy,
        or CuPy on the current device); False, reading nothing, where the
        reader would not decode the chunks in batches (it reads some chains
        the pipeline batches, v2 order F, through zarrs chunk by chunk)."""
        from zarrs_nvcomp.reader import open_array

        key = (request.url, tuple(sorted(request.options.items())))
        array = self._opened.get(key)
        if array is None or array.shape != tuple(self.metadata.shape):
            array = self._opened[key] = open_array(request.url, request.options)
        if array.batched_algorithm is None:
            return False
        on_device = not isinstance(out, np.ndarray)
        device = f"cuda:{_buffers.cupy_module().cuda.Device().id}" if on_device else "cpu"
        try:
            out[...] = array.read(request.selection, device=device)
        except DecodeError as e:
            raise DecodeError(f"{e} (codec {self.batched.codec}, array {request.url})") from None
        return True


# zarr finds pipelines by module and name: "zarrs_nvcomp.NvcompCodecPipeline",
# where the package exports it.
NvcompCodecPipeline.__module__ = "zarrs_nvcomp"
register_pipeline(NvcompCodecPipeline)


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
    keys = [_key(items[i][0]) for i in present]
    stored = [_host_bytes(fetched[i]) for i in present]
    try:
        bodies = [
            chain.framing.body(chunk, key, chain.codec)
            for chunk, key in zip(stored, keys, strict=True)
        ]
    except ValueError as e:
        raise DecodeError(str(e)) from None
    on_device = not isinstance(out, np.ndarray)
    decoded = _decode(chain, bodies, keys, on_device)
    for i, chunk, key, data in zip(present, stored, keys, decoded, strict=True):
        _, spec, chunk_selection, out_selection, _ = items[i]
        expected = math.prod(spec.shape) * dtype.itemsize
        if data.nbytes != expected:
            raise DecodeError(
                f"chunk {key} ({chain.codec}) decodes to {data.nbytes} bytes, "
                f"its shape {spec.shape} needs {expected} bytes"
            )
        try:
            chain.framing.check_decoded(chunk, data, key, chain.codec)
        except ValueError as e:
            raise DecodeError(str(e)) from None
        order = spec.order if chain.v2 else "C"
        part = data.view(dtype).reshape(spec.shape, order=order)[chunk_selection]
        if drop_axes:
            part = part.squeeze(axis=drop_axes)
        out[out_selection] = part
    for i, chunk in enumerate(fetched):
        if chunk is None:
            _, spec, _, out_selection, _ = items[i]
            out[out_selection] = fill_value_or_default(spec)


def _decode(
    chain: BatchedChain, bodies: list[np.ndarray], keys: list[str], on_device: bool
) -> list[Any]:
    """Decodes ``bodies`` (host memory) in one call: into one device
    allocation on the current CUDA device, or into host memory on the CPU."""
    if not bodies:
        return []
    try:
        if on_device:
            cp = _buffers.cupy_module()
            engine = _engine(chain.config_json, f"cuda:{cp.cuda.Device().id}")
            return _buffers.device_outputs(decode_host_to_device(engine, bodies))
        return _buffers.host_outputs(_engine(chain.config_json, "cpu").decode(bodies))
    except DecodeError as e:
        raise DecodeError(_name_chunks(str(e), keys, chain.codec)) from None


@functools.cache
def _engine(config_json: str, device: str) -> Engine:
    return Engine(config_json, device)


_BUFFER = re.compile(r"\bbuffer (\d+)\b")


def _name_chunks(message: str, keys: list[str], codec: str) -> str:
    """The engine's message with each ``buffer i`` replaced by the chunk's key."""

    def key(match: re.Match[str]) -> str:
        i = int(match.group(1))
        return f"chunk {keys[i]} ({codec})" if i < len(keys) else match.group(0)

    return _BUFFER.sub(key, message)


def _key(getter: Any) -> str:
    """The store key of a chunk (a shard's inner chunk: its coordinates)."""
    path = getattr(getter, "path", None)
    if path is not None:
        return str(path)
    coords = getattr(getter, "chunk_coords", None)
    return f"inner chunk {tuple(coords)}" if coords is not None else repr(getter)


def _host_bytes(buffer: Buffer) -> np.ndarray:
    """A chunk's stored bytes as a flat ``uint8`` host array (a shard's
    inner chunks may be GPU buffers under ``enable_gpu()``)."""
    return np.ascontiguousarray(buffer.as_numpy_array()).reshape(-1).view(np.uint8)
