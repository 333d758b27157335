"""The numcodecs codec ``nvcomp_batch``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from numcodecs.abc import Codec

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._zarrs_nvcomp import Engine, normalize_config

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

    Host inputs (bytes, NumPy arrays, ...) give host outputs: ``bytes`` from
    encoding, flat ``uint8`` NumPy arrays from decoding (views into one
    allocation per batch). Device inputs (CuPy, PyTorch: anything with
    ``__cuda_array_interface__`` or a CUDA ``__dlpack__``) give device outputs
    (CuPy arrays, or objects with ``__cuda_array_interface__`` without CuPy).
    """

    codec_id = "nvcomp_batch"

    def __init__(
        self,
        algorithm: str = "lz4",
        options: dict[str, Any] | None = None,
        device: str | None = None,
        *,
        trusted_input: bool = False,
    ) -> None:
        request = {"algorithm": algorithm, "options": dict(options or {})}
        config = json.loads(normalize_config(json.dumps(request)))
        self.algorithm: str = config["algorithm"]
        self.options: dict[str, Any] = config["options"]
        self.device = device
        self.trusted_input = trusted_input
        self._engine = Engine(json.dumps(config), device, trusted_input)

    @property
    def backend(self) -> str:
        """The backend that runs this codec: ``"cpu"`` or ``"cuda:N"``."""
        return self._engine.backend

    # --- configuration --------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "algorithm": self.algorithm, "options": dict(self.options)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> NvCompBatchCodec:
        config = dict(config)
        config.pop("id", None)
        if "algo" in config and "algorithm" not in config:  # kvikio's spelling
            config["algorithm"] = config.pop("algo")
        return cls(**config)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NvCompBatchCodec):
            return NotImplemented
        return self.get_config() == other.get_config()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        device = "" if self.device is None else f", device={self.device!r}"
        return f"NvCompBatchCodec(algorithm={self.algorithm!r}, options={self.options!r}{device})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self.algorithm, dict(self.options), self.device, self.trusted_input),
        )

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
        if _buffers.classify(bufs, "inputs"):
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
        input, each exactly the decoded size, all on the inputs' side): fills
        them and returns them.
        """
        bufs = list(bufs)
        if out is not None:
            out = list(out)
            if len(out) != len(bufs):
                raise ValueError(f"batch of {len(bufs)} inputs given {len(out)} output buffers")
        if not bufs:
            return []
        on_device = _buffers.classify(bufs, "inputs")
        if out is not None and _buffers.classify(out, "outputs") != on_device:
            raise ValueError(
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

    def _decode_device_on_cpu(self, bufs: list[Any], out: list[Any] | None) -> list[Any]:
        """Device inputs on the CPU backend: through host memory, results back on the device."""
        host = [_buffers.to_host(b) for b in bufs]
        decoded = _buffers.host_outputs(self._engine.decode(host))
        if out is None:
            return _buffers.to_device(decoded)
        cp = _buffers.cupy_module()
        for i, (o, d) in enumerate(zip(out, decoded, strict=True)):
            target = cp.asarray(o)
            if target.nbytes != d.nbytes:
                raise ValueError(
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
) -> NvCompBatchCodec:
    return cls(algorithm, options, device, trusted_input=trusted_input)
