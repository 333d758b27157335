"""The numcodecs codec ``nvcomp_batch``."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from numcodecs.abc import Codec

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._zarrs_nvcomp import (
    Engine,
    InvalidArgumentError,
    check_disjoint,
    normalize_config,
)

__all__ = ["NvCompBatchCodec"]


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

    Host inputs (bytes, NumPy arrays, ...) give host outputs: ``bytes`` from
    encoding, flat ``uint8`` NumPy arrays from decoding (views into one
    allocation per batch). Device inputs (CuPy, PyTorch: anything with
    ``__cuda_array_interface__`` or a CUDA ``__dlpack__``) give device outputs
    (CuPy arrays, or objects with ``__cuda_array_interface__`` without CuPy).
    """

    codec_id = "nvcomp_batch"

    #: numcodecs' limit on the size in bytes of each buffer given to
    #: ``encode``/``decode``: larger ones are a ``ValueError``. No limit by
    #: default beyond the format's own (e.g. LZ4's 2,113,929,216 bytes), which
    #: is a ``ValueError`` as well.
    max_buffer_size: int = sys.maxsize

    def __init__(
        self,
        algorithm: str = "lz4",
        options: dict[str, Any] | None = None,
        device: str | None = None,
        *,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
    ) -> None:
        request = {"algorithm": algorithm, "options": dict(options or {})}
        config = normalize_config(request)
        self.algorithm: str = config["algorithm"]
        self.options: dict[str, Any] = config["options"]
        self.device = device
        self.trusted_input = trusted_input
        # Private, so that numcodecs' get_config leaves it out of the metadata.
        self._max_decoded_size = max_decoded_size
        self._engine = Engine(config, device, trusted_input, max_decoded_size=max_decoded_size)

    @property
    def max_decoded_size(self) -> int:
        """The largest decoded size a buffer decoded into host memory may declare."""
        return self._engine.max_decoded_size

    @property
    def backend(self) -> str:
        """The backend that runs this codec: ``"cpu"`` or ``"cuda:N"``."""
        return self._engine.backend

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
        extra = {k: config.pop(k) for k in ("trusted_input", "max_decoded_size") if k in config}
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
        return f"NvCompBatchCodec({', '.join(args)})"

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.algorithm, dict(self.options), self.device, self.trusted_input)
        return (_rebuild, (type(self), *args, self._max_decoded_size))

    # --- single buffers -------------------------------------------------

    def encode(self, buf: Any) -> Any:
        """Compresses one buffer: ``bytes`` for host input, a device array for device input."""
        return self.encode_batch([buf])[0]

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Decompresses one buffer, into ``out`` when given (then returns ``out``)."""
        return self.decode_batch([buf], None if out is None else [out])[0]

    # --- batches --------------------------------------------------------

    def encode_batch(self, bufs: Sequence[Any]) -> list[Any]:
        """Compresses every buffer of ``bufs`` in one engine call."""
        bufs = list(bufs)
        if not bufs:
            return []
        on_device = _buffers.classify(bufs, "inputs")
        self._check_buffer_sizes(bufs, on_device)
        if on_device:
            if self._engine.device_ordinal is None:
                host = [_buffers.to_host(b) for b in bufs]
                return _buffers.to_device(self._engine.encode(host).to_bytes_list())
            pairs, _alive = _buffers.device_pairs(bufs, "input")
            return _buffers.device_outputs(self._engine.encode_device(pairs))
        views = [_buffers.host_view(b, what=f"input {i}") for i, b in enumerate(bufs)]
        return self._engine.encode(views).to_bytes_list()

    def decode_batch(self, bufs: Sequence[Any], out: Sequence[Any] | None = None) -> list[Any]:
        """Decompresses every buffer of ``bufs`` in one engine call.

        Without ``out``: host inputs give ``uint8`` NumPy arrays (views of one
        allocation), device inputs device arrays. With ``out`` (one buffer per
        input, each exactly the decoded size, all on the inputs' side, none
        sharing memory with another buffer, as they are written in parallel:
        ``ValueError`` otherwise): fills them and returns them; ``None`` entries
        of ``out`` are allocated, as without ``out``.
        """
        bufs = list(bufs)
        if out is not None:
            out = list(out)
            if len(out) != len(bufs):
                raise InvalidArgumentError(
                    f"batch of {len(bufs)} inputs given {len(out)} output buffers"
                )
            if any(o is None for o in out):
                return self._decode_some_into(bufs, out)
        if not bufs:
            return []
        on_device = _buffers.classify(bufs, "inputs")
        self._check_buffer_sizes(bufs, on_device)
        if out is not None and _buffers.classify(out, "outputs") != on_device:
            raise InvalidArgumentError(
                "inputs and outputs must be on the same side (both host or both device)"
            )
        if on_device and self._engine.device_ordinal is None:
            return self._decode_device_on_cpu(bufs, out)
        if on_device:
            pairs, _alive = _buffers.device_pairs(bufs, "input")
            if out is None:
                return _buffers.device_outputs(self._engine.decode_device(pairs))
            out_pairs, _out_alive = _buffers.device_pairs(out, "output")
            self._engine.decode_device_into(pairs, out_pairs)
            return out
        views = [_buffers.host_view(b, what=f"input {i}") for i, b in enumerate(bufs)]
        if out is None:
            return _buffers.host_outputs(self._engine.decode(views))
        outs = [_buffers.host_view(o, writable=True, what=f"output {i}") for i, o in enumerate(out)]
        self._engine.decode_into(views, outs)
        return out

    def _decode_some_into(self, bufs: list[Any], out: list[Any]) -> list[Any]:
        """``decode_batch`` where some entries of ``out`` are ``None``: one call
        for the buffers with an output, one for those without."""
        result = list(out)
        given = [i for i, o in enumerate(out) if o is not None]
        fresh = [i for i, o in enumerate(out) if o is None]
        with _batch_indices(given):
            self.decode_batch([bufs[i] for i in given], [out[i] for i in given])
        with _batch_indices(fresh):
            for i, decoded in zip(fresh, self.decode_batch([bufs[i] for i in fresh]), strict=True):
                result[i] = decoded
        return result

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

    def _decode_device_on_cpu(self, bufs: list[Any], out: list[Any] | None) -> list[Any]:
        """Device inputs on the CPU backend: through host memory, results back on the device."""
        if out is not None:
            check_disjoint(
                _buffers.device_pairs(bufs, "input")[0], _buffers.device_pairs(out, "output")[0]
            )
        host = [_buffers.to_host(b) for b in bufs]
        decoded = _buffers.host_outputs(self._engine.decode(host))
        if out is None:
            return _buffers.to_device(decoded)
        cp = _buffers.cupy_module()
        for i, (o, d) in enumerate(zip(out, decoded, strict=True)):
            target = cp.asarray(o)
            if target.nbytes != d.nbytes:
                raise InvalidArgumentError(
                    f"output buffer {i} holds {target.nbytes} bytes but buffer {i} "
                    f"decodes to {d.nbytes} bytes"
                )
            target.reshape(-1).view(cp.uint8)[...] = cp.asarray(np.ascontiguousarray(d))
        return out


def _rebuild(
    cls: type[NvCompBatchCodec],
    algorithm: str,
    options: dict[str, Any],
    device: str | None,
    trusted_input: bool,
    max_decoded_size: int | None = None,
) -> NvCompBatchCodec:
    return cls(
        algorithm, options, device, trusted_input=trusted_input, max_decoded_size=max_decoded_size
    )


class _batch_indices:
    """Renumbers the buffers an error names from a part of a batch to the
    whole batch: ``indices[i]`` is the batch index of the part's buffer ``i``."""

    _BUFFER = re.compile(r"\bbuffer (\d+)\b")

    def __init__(self, indices: list[int]) -> None:
        self._indices = indices

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, err: BaseException | None, _tb: Any) -> None:
        if err is None or not err.args or not isinstance(err.args[0], str):
            return

        def renumber(match: re.Match[str]) -> str:
            i = int(match.group(1))
            return f"buffer {self._indices[i]}" if i < len(self._indices) else match.group(0)

        err.args = (self._BUFFER.sub(renumber, err.args[0]), *err.args[1:])
