"""The numcodecs codec ``nvcomp_batch``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from numcodecs.abc import Codec

from zarrs_nvcomp import _buffers, _device_choice
from zarrs_nvcomp._args import checked_bool, checked_int, checked_mapping, checked_optional_str
from zarrs_nvcomp._decode_into import decode_into, decode_into_one
from zarrs_nvcomp._engine_call import EngineCall
from zarrs_nvcomp._zarrs_nvcomp import (
    Engine,
    InvalidArgumentError,
    has_cpu_implementation,
    normalize_config,
)
from zarrs_nvcomp.types import Algorithm

__all__ = ["DEVICE_OUTPUTS", "NvCompBatchCodec"]

#: The values of ``NvCompBatchCodec(device_outputs=...)``.
DEVICE_OUTPUTS = ("cupy", "views")


class NvCompBatchCodec(Codec):
    """nvCOMP's batched compression as a numcodecs codec.

    Parameters
    ----------
    algorithm
        ``"lz4"``, ``"snappy"``, ``"zstd"``, ``"deflate"``, ``"gzip"``,
        ``"gdeflate"`` (GPU or CPU), or ``"cascaded"``, ``"bitcomp"``,
        ``"ans"`` (GPU only). Case-insensitive.
    options
        nvCOMP's options of the algorithm, e.g. ``{"data_type": "uint16"}``;
        unknown options are a ``ValueError`` naming the valid ones.
    device
        ``None``: the GPU when one is usable, the CPU otherwise; ``"cpu"``;
        ``"cuda"`` or ``"cuda:N"``: that GPU, or a ``GpuUnavailableError``
        saying why it cannot be used. The device is not part of the
        configuration: data written on one backend is read on the other.
    max_decoded_size
        The largest decoded size in bytes a buffer may declare; larger ones are
        a ``DecodeError`` before anything is allocated. ``None``: what the
        destination can hold (the machine's memory for host outputs, the GPU's
        for device outputs). Not part of the configuration.
    stream
        The CUDA stream that orders device work (a CuPy or PyTorch stream, an
        object with ``__cuda_stream__``, or a raw handle); each batch call may
        name another. Device inputs are read once the work enqueued on it so
        far has run, in place of CuPy's current stream; results are complete
        when a call returns, so they are ready for work on that stream. (The
        engine still waits for its own stream before returning: calls are not
        yet asynchronous.) Not part of the configuration.
    device_outputs
        What the GPU's results for device inputs are: ``"cupy"`` (the
        default), CuPy arrays (`zarrs_nvcomp.CudaArray` views where
        CuPy is not installed); ``"views"``, `zarrs_nvcomp.CudaArray`
        views always. Both are views of one device allocation per call, which
        each keeps alive. A CuPy array costs over a microsecond per buffer to
        make, a view some tens of nanoseconds, so for batches of thousands of
        small buffers ``"views"`` is the fast form: ``cupy.asarray(view)``
        (or PyTorch's, Numba's, JAX's import through ``__dlpack__`` or
        ``__cuda_array_interface__``) gives an array of the same memory
        without a copy when it is needed. Device inputs decoded on the CPU
        backend come back as CuPy arrays either way. Not part of the
        configuration.

    Notes
    -----
    With ``device=None`` each host batch runs where it is fastest: small
    batches on the CPU, large ones on the GPU (see
    ``zarrs_nvcomp._device_choice``); device inputs stay on the GPU.
    `last_backend` says where the last call ran.

    Host inputs (bytes, NumPy arrays, ...) give host outputs: ``bytes`` from
    encoding, flat ``uint8`` NumPy arrays from decoding (views into one
    allocation per batch). Device inputs (CuPy, PyTorch: anything with
    ``__cuda_array_interface__`` or a CUDA ``__dlpack__``) give device outputs:
    CuPy arrays, or `zarrs_nvcomp.CudaArray` views (``device_outputs``).
    """

    codec_id = "nvcomp_batch"

    #: numcodecs' limit on the size in bytes of each buffer given to
    #: ``encode``/``decode``: larger ones are a ``ValueError``. No limit by
    #: default beyond the format's own (e.g. LZ4's 2,113,929,216 bytes), which
    #: is a ``ValueError`` as well.
    max_buffer_size: int = sys.maxsize

    def __init__(
        self,
        algorithm: Algorithm = "lz4",
        options: dict[str, Any] | None = None,
        device: str | None = None,
        *,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
        stream: Any = None,
        device_outputs: str = "cupy",
    ) -> None:
        trusted_input = checked_bool("trusted_input", trusted_input)
        device = checked_optional_str("device", device)
        max_decoded_size = checked_int("max_decoded_size", max_decoded_size)
        request = {"algorithm": algorithm, "options": checked_mapping("options", options)}
        config = normalize_config(request)
        self.algorithm: str = config["algorithm"]
        self.options: dict[str, Any] = config["options"]
        self.device = device
        self.trusted_input = trusted_input
        # Private, so that numcodecs' get_config leaves it out of the metadata.
        self._max_decoded_size = max_decoded_size
        self._engine = Engine(config, device, trusted_input, max_decoded_size=max_decoded_size)
        self.stream = stream
        _buffers.stream_handle(stream)  # checked now, not at the first call
        if device_outputs not in DEVICE_OUTPUTS:
            raise InvalidArgumentError(
                f"device_outputs must be one of {', '.join(map(repr, DEVICE_OUTPUTS))}, "
                f"not {device_outputs!r}"
            )
        self.device_outputs = device_outputs
        #: Where the last batch call ran: ``"cpu"``, ``"cuda:N"``, or None before any.
        self.last_backend: str | None = None
        # device=None: a CPU engine too, for the batches too small for the GPU.
        auto_cpu = device is None and self._engine.device_ordinal is not None
        self._cpu_engine = (
            Engine(config, "cpu", trusted_input, max_decoded_size=max_decoded_size)
            if auto_cpu and has_cpu_implementation(config)
            else None
        )

    @property
    def max_decoded_size(self) -> int:
        """The largest decoded size a buffer decoded into host memory may declare."""
        return self._engine.max_decoded_size

    @property
    def backend(self) -> str:
        """The backend that runs this codec: ``"cpu"`` or ``"cuda:N"``; with
        ``device=None``, the GPU's when one is usable, though small host
        batches run on the CPU (`last_backend`)."""
        return self._engine.backend

    def _host_engine(self, items: int, nbytes: int, thresholds: _device_choice.Thresholds) -> Any:
        """The engine that runs a host batch: with ``device=None`` the CPU's
        below the thresholds, else the codec's. Records it in ``last_backend``."""
        engine = self._engine
        if self._cpu_engine is not None and not _device_choice.use_gpu(
            on_device=False, items=items, nbytes=nbytes, thresholds=thresholds, gpu_usable=True
        ):
            engine = self._cpu_engine
        self.last_backend = engine.backend
        return engine

    def _device_outputs(self, batch: Any) -> list[Any]:
        """The buffers of a device result, as ``device_outputs`` says."""
        return _buffers.device_outputs(batch, views=self.device_outputs == "views")

    def _stream(self, stream: Any) -> int | None:
        """The handle of the call's stream, or of the codec's."""
        return _buffers.stream_handle(self.stream if stream is None else stream)

    # --- configuration --------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "algorithm": self.algorithm, "options": dict(self.options)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> NvCompBatchCodec:
        """The codec of a stored configuration, which kvikio's
        ``NvCompBatchCodec`` may have written (its spellings are read, and a
        GDeflate configuration without ``has_header`` means kvikio's bare
        streams); ``device`` is not stored but may be given."""
        config = dict(config)
        # Arguments that are not stored, but may be given.
        given = ("trusted_input", "max_decoded_size", "device_outputs")
        extra = {k: config.pop(k) for k in given if k in config}
        device = config.pop("device", None)
        stored = {k: v for k, v in config.items() if k != "id"}
        normalized = normalize_config(stored, stored=True)
        return cls(normalized["algorithm"], normalized["options"], device, **extra)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NvCompBatchCodec):
            return NotImplemented
        return self.get_config() == other.get_config()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # Short, as numcodecs' reprs are: only what differs from the defaults.
        defaults = normalize_config({"algorithm": self.algorithm})
        options = {k: v for k, v in self.options.items() if defaults["options"].get(k) != v}
        args = [f"algorithm={self.algorithm!r}"]
        if options:
            args.append(f"options={options!r}")
        if self.device is not None:
            args.append(f"device={self.device!r}")
        if self.trusted_input:
            args.append("trusted_input=True")
        if self._max_decoded_size is not None:
            args.append(f"max_decoded_size={self._max_decoded_size!r}")
        if self.device_outputs != "cupy":
            args.append(f"device_outputs={self.device_outputs!r}")
        return f"NvCompBatchCodec({', '.join(args)})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The stream is not pickled: it belongs to this process.
        args = (self.algorithm, dict(self.options), self.device, self.trusted_input)
        return (_rebuild, (type(self), *args, self._max_decoded_size, self.device_outputs))

    # --- single buffers -------------------------------------------------

    def encode(self, buf: Any) -> Any:
        """Compresses one buffer: ``bytes`` for host input, a device array for device input."""
        return self.encode_batch([buf])[0]

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Decompresses one buffer, into ``out`` when given (then returns ``out``)."""
        return self.decode_batch([buf], None if out is None else [out])[0]

    # --- batches --------------------------------------------------------

    def encode_batch(self, bufs: Sequence[Any], *, stream: Any = None) -> list[Any]:
        """Compresses every buffer of ``bufs`` in one engine call (``stream``:
        see the class documentation)."""
        return self._encode_call(list(bufs), stream).run()

    async def encode_batch_async(self, bufs: Sequence[Any], *, stream: Any = None) -> list[Any]:
        """`encode_batch`, awaited: the engine works on the library's own
        threads, not on a Python thread, while the event loop goes on.
        Cancelling the awaiting task drops the result; the batch ends in the
        background, holding its inputs until then."""
        return await self._encode_call(list(bufs), stream).run_async()

    def _encode_call(self, bufs: list[Any], stream: Any) -> EngineCall:
        """The call that encodes ``bufs``."""
        handle = self._stream(stream)
        if not bufs:
            return EngineCall.done([])
        on_device = _buffers.classify(bufs, "inputs")
        self._check_buffer_sizes(bufs, on_device)
        if on_device:
            self.last_backend = self._engine.backend
            if self._engine.device_ordinal is None:
                host = [_buffers.to_host(b) for b in bufs]
                return EngineCall(self._engine.encode, (host,), _device_bytes_list)
            regions, alive = _buffers.device_regions(bufs, "input", handle)
            return EngineCall(
                self._engine.device_batch, (regions, True), self._device_outputs, alive
            )
        views = [_buffers.host_view(b, what=f"input {i}") for i, b in enumerate(bufs)]
        engine = self._host_engine(len(views), sum(v.nbytes for v in views), _device_choice.ENCODE)
        return EngineCall(engine.encode, (views,), _bytes_list)

    def decode_batch(
        self,
        bufs: Sequence[Any],
        out: Any = None,
        *,
        offsets: Any = None,
        stream: Any = None,
    ) -> Any:
        """Decompresses every buffer of ``bufs`` in one engine call.

        Without ``out``: host inputs give ``uint8`` NumPy arrays (views of one
        allocation), device inputs device arrays. With ``out`` (one buffer per
        input, each exactly the decoded size, all on the inputs' side, none
        sharing memory with another buffer, as they are written in parallel:
        ``ValueError`` otherwise): fills them and returns them; ``None`` entries
        of ``out`` are allocated, as without ``out``.

        With ``offsets``, ``out`` is one preallocated contiguous buffer (host
        or device, the inputs' side) and ``offsets`` says where each decoded
        buffer goes in its bytes: ``len(bufs) + 1`` boundaries (buffer ``i``
        at ``offsets[i]:offsets[i + 1]``, back to back, as ``numpy.cumsum`` of
        the sizes with a leading 0 gives them) or ``len(bufs)`` ``(start,
        end)`` pairs (any order, gaps allowed). Each range must be exactly its
        buffer's decoded size and lie within ``out``; ranges must not overlap
        one another or an input (``ValueError`` naming the buffers). Fills
        ``out`` and returns it (for device buffers without a Python object per
        buffer).

        ``stream``: see the class documentation.
        """
        bufs = list(bufs)
        if offsets is not None:
            return decode_into_one(self, bufs, out, offsets, self._stream(stream))
        if out is None:
            return self._decode_call(bufs, stream).run()
        return decode_into(self, bufs, list(out), stream)

    async def decode_batch_async(self, bufs: Sequence[Any], *, stream: Any = None) -> list[Any]:
        """`decode_batch` without ``out``, awaited (as `encode_batch_async`)."""
        return await self._decode_call(list(bufs), stream).run_async()

    def _decode_call(self, bufs: list[Any], stream: Any) -> EngineCall:
        """The call that decodes ``bufs`` into new buffers."""
        handle = self._stream(stream)
        if not bufs:
            return EngineCall.done([])
        on_device = _buffers.classify(bufs, "inputs")
        self._check_buffer_sizes(bufs, on_device)
        if not on_device:
            views, engine = self._host_decode_engine(bufs)
            return EngineCall(engine.decode, (views,), _buffers.host_outputs)
        self.last_backend = self._engine.backend
        if self._engine.device_ordinal is None:
            host = [_buffers.to_host(b) for b in bufs]
            return EngineCall(self._engine.decode, (host,), _host_outputs_to_device)
        regions, alive = _buffers.device_regions(bufs, "input", handle)
        return EngineCall(self._engine.device_batch, (regions, False), self._device_outputs, alive)

    def _host_decode_engine(self, bufs: list[Any]) -> tuple[list[np.ndarray], Any]:
        """Views of host buffers, and the engine ``device`` picks to decode them."""
        views = [_buffers.host_view(b, what=f"input {i}") for i, b in enumerate(bufs)]
        engine = self._host_engine(
            len(views),
            sum(v.nbytes for v in views),
            _device_choice.decode_thresholds(self.algorithm),
        )
        return views, engine

    # --- packed batches ---------------------------------------------------

    def encode_packed(
        self, data: Any, sizes: Any, *, out: Any = None, stream: Any = None
    ) -> tuple[Any, np.ndarray]:
        """Compresses the items of one contiguous 1-D byte buffer ``data``
        (host or device), ``sizes[i]`` bytes each, back to back. Returns
        ``(buffer, sizes)`` of the same kind: the encoded items back to back
        and their sizes (``uint64``), byte-identical to `encode_batch`
        of the items. ``out``: a buffer of exactly the encoded size to copy
        the result into (returned in place of a new one)."""
        return self._packed(data, sizes, out, stream, encode=True)

    def decode_packed(
        self, data: Any, sizes: Any, *, out: Any = None, stream: Any = None
    ) -> tuple[Any, np.ndarray]:
        """Decompresses the items of one contiguous 1-D byte buffer ``data``
        (host or device), ``sizes[i]`` bytes each. Returns ``(buffer, sizes)``
        of the same kind, byte-identical to `decode_batch` of the items.
        ``out``: as in `encode_packed`."""
        return self._packed(data, sizes, out, stream, encode=False)

    def _packed(
        self, data: Any, sizes: Any, out: Any, stream: Any, *, encode: bool
    ) -> tuple[Any, np.ndarray]:
        items = _buffers.item_sizes(sizes)
        handle = self._stream(stream)
        if _buffers.is_device(data):
            result, result_sizes = self._packed_device(data, items, handle, encode)
        else:
            view = _buffers.host_view(data, what="data")
            thresholds = (
                _device_choice.ENCODE
                if encode
                else _device_choice.decode_thresholds(self.algorithm)
            )
            engine = self._host_engine(len(items), view.nbytes, thresholds)
            call = engine.encode_packed if encode else engine.decode_packed
            result, result_sizes = _buffers.packed_host(call(view, items))
        if out is None:
            return result, result_sizes
        return _buffers.copy_into(out, result), result_sizes

    def _packed_device(
        self, data: Any, items: np.ndarray, handle: int | None, encode: bool
    ) -> tuple[Any, np.ndarray]:
        self.last_backend = self._engine.backend
        if self._engine.device_ordinal is None:
            host = _buffers.to_host(data)
            call = self._engine.encode_packed if encode else self._engine.decode_packed
            result, result_sizes = _buffers.packed_host(call(host, items))
            return _buffers.to_device([result])[0], result_sizes
        regions, _alive = _buffers.device_regions([data], "data", handle)
        ((ptr, nbytes),) = regions.regions
        return _buffers.packed_device(self._engine.device_packed(ptr, nbytes, items, encode))

    def _check_buffer_sizes(self, bufs: list[Any], on_device: bool) -> None:
        """numcodecs' ``max_buffer_size`` check."""
        limit = self.max_buffer_size
        if limit >= sys.maxsize:
            return
        for i, b in enumerate(bufs):
            if on_device:
                size = _buffers.device_region(b, what=f"input {i}").nbytes
            else:
                size = _buffers.host_view(b, what=f"input {i}").nbytes
            if size > limit:
                raise InvalidArgumentError(
                    f"buffer {i} of the batch holds {size} bytes; the codec's "
                    f"max_buffer_size is {limit}"
                )


def _bytes_list(batch: Any) -> list[bytes]:
    return batch.to_bytes_list()


def _device_bytes_list(batch: Any) -> list[Any]:
    """A host batch of device inputs on the CPU backend, back on the device."""
    return _buffers.to_device(batch.to_bytes_list())


def _host_outputs_to_device(batch: Any) -> list[Any]:
    return _buffers.to_device(_buffers.host_outputs(batch))


def _rebuild(
    cls: type[NvCompBatchCodec],
    algorithm: str,
    options: dict[str, Any],
    device: str | None,
    trusted_input: bool,
    max_decoded_size: int | None = None,
    device_outputs: str = "cupy",
) -> NvCompBatchCodec:
    return cls(
        algorithm,
        options,
        device,
        trusted_input=trusted_input,
        max_decoded_size=max_decoded_size,
        device_outputs=device_outputs,
    )
