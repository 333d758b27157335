"""``decode_batch`` into the caller's buffers: a list of outputs, one per
input, or one buffer at offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from zarrs_nvcomp import _buffers
from zarrs_nvcomp._batch_indices import batch_indices
from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError, check_disjoint, device_regions_at

if TYPE_CHECKING:
    from zarrs_nvcomp.numcodecs import NvCompBatchCodec

__all__ = ["decode_into", "decode_into_one"]


def decode_into(codec: NvCompBatchCodec, bufs: list[Any], out: list[Any], stream: Any) -> list[Any]:
    """``decode_batch`` of ``bufs`` into ``out`` (see there)."""
    if len(out) != len(bufs):
        raise InvalidArgumentError(f"batch of {len(bufs)} inputs given {len(out)} output buffers")
    if any(o is None for o in out):
        return _decode_some_into(codec, bufs, out, stream)
    if not bufs:
        return []
    handle = codec._stream(stream)
    on_device = _buffers.classify(bufs, "inputs")
    codec._check_buffer_sizes(bufs, on_device)
    if _buffers.classify(out, "outputs") != on_device:
        raise InvalidArgumentError(
            "inputs and outputs must be on the same side (both host or both device)"
        )
    if not on_device:
        outs = [_buffers.host_view(o, writable=True, what=f"output {i}") for i, o in enumerate(out)]
        _decode_host_into(codec, bufs, outs)
        return out
    codec.last_backend = codec._engine.backend
    if codec._engine.device_ordinal is None:
        return _decode_device_on_cpu(codec, bufs, out)
    regions, _alive = _buffers.device_regions(bufs, "input", handle)
    out_regions, _out_alive = _buffers.device_regions(out, "output", handle)
    codec._engine.decode_device_into(regions, out_regions)
    return out


def decode_into_one(
    codec: NvCompBatchCodec, bufs: list[Any], out: Any, offsets: Any, handle: int | None
) -> Any:
    """``decode_batch`` into one buffer ``out`` at ``offsets`` (see there)."""
    if out is None or isinstance(out, list | tuple):
        raise InvalidArgumentError(
            "offsets= needs out= to be one buffer, not "
            + ("None" if out is None else f"a {type(out).__name__}")
        )
    on_device = _buffers.is_device(out)
    if bufs and _buffers.classify(bufs, "inputs") != on_device:
        raise InvalidArgumentError(
            "inputs and out must be on the same side (both host or both device)"
        )
    if on_device:
        out_region, _out_alive = _buffers.device_regions([out], "out", handle)
        ((ptr, nbytes),) = out_region.regions
    else:
        whole = _buffers.host_view(out, writable=True, what="out")
        nbytes = whole.nbytes
    ranges = _buffers.item_ranges(offsets, len(bufs), nbytes)
    if not bufs:
        return out
    codec._check_buffer_sizes(bufs, on_device)
    if not on_device:
        _decode_host_into(codec, bufs, [whole[a:b] for a, b in ranges.tolist()])
        return out
    codec.last_backend = codec._engine.backend
    if codec._engine.device_ordinal is None:
        # Device data on the CPU backend: through host memory, into CuPy
        # views of out's bytes.
        flat = _buffers.device_bytes(ptr, nbytes, _out_alive[0])
        _decode_device_on_cpu(codec, bufs, [flat[a:b] for a, b in ranges.tolist()])
        return out
    regions, _alive = _buffers.device_regions(bufs, "input", handle)
    codec._engine.decode_device_into(regions, device_regions_at(ptr, ranges))
    return out


def _decode_some_into(
    codec: NvCompBatchCodec, bufs: list[Any], out: list[Any], stream: Any
) -> list[Any]:
    """``decode_batch`` where some entries of ``out`` are ``None``: one call
    for the buffers with an output, one for those without."""
    result = list(out)
    given = [i for i, o in enumerate(out) if o is not None]
    fresh = [i for i, o in enumerate(out) if o is None]
    with batch_indices(given):
        codec.decode_batch([bufs[i] for i in given], [out[i] for i in given], stream=stream)
    with batch_indices(fresh):
        decoded_fresh = codec.decode_batch([bufs[i] for i in fresh], stream=stream)
        for i, decoded in zip(fresh, decoded_fresh, strict=True):
            result[i] = decoded
    return result


def _decode_device_on_cpu(codec: NvCompBatchCodec, bufs: list[Any], out: list[Any]) -> list[Any]:
    """Device inputs on the CPU backend into device buffers ``out``:
    through host memory."""
    check_disjoint(
        _buffers.device_regions(bufs, "input")[0],
        _buffers.device_regions(out, "output")[0],
    )
    host = [_buffers.to_host(b) for b in bufs]
    decoded = _buffers.host_outputs(codec._engine.decode(host))
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


def _decode_host_into(codec: NvCompBatchCodec, bufs: list[Any], outs: list[np.ndarray]) -> None:
    """Host buffers decoded into the writable ``outs``."""
    views, engine = codec._host_decode_engine(bufs)
    engine.decode_into(views, outs)
