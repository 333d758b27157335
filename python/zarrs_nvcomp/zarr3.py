"""The zarr 3 codec ``nvcomp_batch`` (a bytes-to-bytes codec).

zarr calls a codec's batch ``decode``/``encode`` with the chunks of one
codec-pipeline batch; this codec hands all of them to one engine call (one
nvCOMP launch on the GPU). zarr's ``codec_pipeline.batch_size`` (default 1)
decides how many chunks that is: raise it with `set_batch_size` (or
``zarrs_nvcomp.set_zarr_batch_size``) before opening the array.

With ``zarr.config.enable_gpu()`` chunks arrive and leave as GPU buffers and
never pass through host memory.

Metadata::

    {"name": "nvcomp_batch", "configuration": {"algorithm": "lz4", "options": {...}}}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr
from zarr.abc.codec import BytesBytesCodec
from zarr.core.buffer import cpu
from zarr.core.common import JSON, parse_named_configuration

from zarrs_nvcomp._buffers import cupy_module
from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError
from zarrs_nvcomp.numcodecs import NvCompBatchCodec
from zarrs_nvcomp.types import Algorithm

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = ["CODEC_NAME", "NvCompBatchZarrCodec", "set_batch_size"]

CODEC_NAME = "nvcomp_batch"

#: What ``set_batch_size(None)`` sets: more chunks than a GPU decodes well in
#: one call. Not larger: zarr splits requests with ``itertools.batched``, which
#: allocates a tuple of the full batch size up front (16 GiB for 2**31 - 1).
UNLIMITED_BATCH_SIZE = 2**16


def set_batch_size(batch_size: int | None = None) -> Any:
    """Sets zarr's ``codec_pipeline.batch_size``: how many chunks zarr hands to
    a codec per call. ``None``: all chunks of a read or write request, in
    calls of up to `UNLIMITED_BATCH_SIZE` chunks.

    Returns zarr's config setter, so it also works as a context manager that
    restores the previous value. zarr reads the value when an array is opened.
    """
    if batch_size is None:
        batch_size = UNLIMITED_BATCH_SIZE
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
    return zarr.config.set({"codec_pipeline.batch_size": int(batch_size)})


@dataclass(frozen=True)
class NvCompBatchZarrCodec(BytesBytesCodec):
    """nvCOMP batched compression as a zarr 3 bytes-to-bytes codec: what
    zarr 3's ``compressors=`` takes (``NvCompBatchZarrCodec("lz4")``, alone
    or in a list), where zarr 2 and numcodecs take
    `zarrs_nvcomp.NvCompBatchCodec`.

    ``algorithm`` and ``options`` as in `zarrs_nvcomp.NvCompBatchCodec`;
    ``device`` (None, "cpu", "cuda", "cuda:N") picks the backend and is not
    stored in the metadata.
    """

    is_fixed_size = False

    algorithm: str = "lz4"
    options: dict[str, JSON] = field(default_factory=dict)
    device: str | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        algorithm: Algorithm = "lz4",
        *,
        options: dict[str, JSON] | None = None,
        device: str | None = None,
    ) -> None:
        codec = NvCompBatchCodec(algorithm, options, device)
        object.__setattr__(self, "algorithm", codec.algorithm)
        object.__setattr__(self, "options", codec.options)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "_codec", codec)

    @cached_property
    def _codec(self) -> NvCompBatchCodec:  # rebuilt after unpickling / copying
        return NvCompBatchCodec(self.algorithm, self.options, self.device)

    @property
    def backend(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
        return self._codec.backend

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, CODEC_NAME)
        # Read as stored metadata: kvikio's spellings and defaults apply.
        codec = NvCompBatchCodec.from_config(dict(configuration or {}))
        return cls(algorithm=codec.algorithm, options=codec.options, device=codec.device)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "name": CODEC_NAME,
            "configuration": {"algorithm": self.algorithm, "options": dict(self.options)},
        }

    def compute_encoded_size(self, _input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError

    def __hash__(self) -> int:
        return hash((CODEC_NAME, self.algorithm, tuple(sorted(self.options.items()))))

    # --- batches: one engine call for all chunks zarr hands over --------

    async def decode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        items, present, arrays = _present(chunks_and_specs)
        decoded = await self._codec.decode_batch_async(arrays)
        return _as_buffers(items, present, decoded, keep_host=False)

    async def encode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        items, present, arrays = _present(chunks_and_specs)
        encoded = self._to_host(await self._codec.encode_batch_async(arrays))
        return _as_buffers(items, present, encoded, keep_host=True)

    @staticmethod
    def _to_host(results: list[Any]) -> list[Any]:
        """Encoded device results brought to host memory in one transfer
        (pinned, from CuPy's pool). zarr's stores write host bytes: given
        device buffers they copied each encoded chunk on its own, a
        synchronous pageable copy per chunk."""
        cp = cupy_module()
        if cp is None or not results or not isinstance(results[0], cp.ndarray):
            return results
        whole = results[0].base
        if whole is None or any(r.base is not whole for r in results):
            return [cp.asnumpy(r) for r in results]
        import cupyx

        host = cupyx.empty_pinned(whole.shape, dtype=np.uint8)
        whole.get(out=host)
        base = whole.data.ptr
        return [host[r.data.ptr - base : r.data.ptr - base + r.nbytes] for r in results]

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return next(iter(await self.decode([(chunk_bytes, chunk_spec)])))  # type: ignore[return-value]

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return next(iter(await self.encode([(chunk_bytes, chunk_spec)])))


def _present(
    chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]],
) -> tuple[list[tuple[Buffer | None, ArraySpec]], list[int], list[Any]]:
    """zarr's batch, the indices of its chunks that are present, and those
    chunks as arrays."""
    items = list(chunks_and_specs)
    present = [i for i, (chunk, _) in enumerate(items) if chunk is not None]
    return items, present, [items[i][0].as_array_like() for i in present]  # type: ignore[union-attr]


def _as_buffers(
    items: list[tuple[Buffer | None, ArraySpec]],
    present: list[int],
    results: list[Any],
    *,
    keep_host: bool,
) -> list[Buffer | None]:
    """The engine's ``results`` as zarr buffers of each chunk's prototype,
    ``None`` for absent chunks."""
    buffers: list[Buffer | None] = [None] * len(items)
    for i, result in zip(present, results, strict=True):
        buffer = items[i][1].prototype.buffer
        if isinstance(result, bytes):
            buffers[i] = buffer.from_bytes(result)
        elif keep_host and isinstance(result, np.ndarray):
            # Encoded chunks go to a store, which writes host bytes: a
            # GPU prototype would copy them back to the device first.
            buffers[i] = cpu.Buffer.from_array_like(result)
        else:
            buffers[i] = buffer.from_array_like(result)
    return buffers
