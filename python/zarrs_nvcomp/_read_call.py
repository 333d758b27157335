"""One read's arguments, checked and resolved once for the blocking read
(`zarrs_nvcomp.Array.read`) and the awaited one (``Array.read_async``): the
selection as ascending ranges and the axes to flip, the device, the
caller's ``out=`` memory, and the result made of what the reader
returned."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrs_nvcomp._args import checked_bool, checked_int
from zarrs_nvcomp._read_out import LentOutput, lent_output, read_result, resolve_device
from zarrs_nvcomp._selection import normalize

__all__ = ["ReadCall", "read_call"]


@dataclass(frozen=True)
class ReadCall:
    """A read of ``strided`` (ascending ranges; ``flips`` the axes to
    reverse, ``out_shape`` the selection's shape) on ``device``, of
    elements of ``dtype``, into ``lent`` memory where given."""

    dtype: np.dtype
    requested: str | None
    device: str
    strided: list[tuple[int, int, int]]
    flips: tuple[int, ...]
    out_shape: tuple[int, ...]
    lent: LentOutput | None
    max_concurrent_requests: int | None
    trusted_input: bool
    max_decoded_size: int | None

    @property
    def empty(self) -> bool:
        """Whether the selection has no element."""
        return math.prod(self.out_shape) == 0

    def options(self) -> dict[str, Any]:
        """The keyword arguments of a read of the same selection into new
        memory (the reader writes ascending selections: a flipped read into
        ``out`` is read so, then copied)."""
        return {
            "device": self.device,
            "max_concurrent_requests": self.max_concurrent_requests,
            "trusted_input": self.trusted_input,
            "max_decoded_size": self.max_decoded_size,
        }

    def result(self, data: Any) -> Any:
        """The read's result of ``data``, what the reader returned."""
        return read_result(data, self.strided, self.flips, self.out_shape, self.dtype, self.device)


def read_call(
    array: Any,
    selection: Any,
    *,
    device: str | None,
    max_concurrent_requests: Any,
    trusted_input: Any,
    max_decoded_size: Any,
    out: Any,
) -> ReadCall:
    """The read of ``selection`` of ``array`` with these arguments, each
    checked (a wrong one raises before anything is read)."""
    dtype = array.dtype
    strided, flips, out_shape = normalize(selection, array.shape)
    lent = None if out is None else lent_output(out, out_shape, dtype, device)
    return ReadCall(
        dtype=dtype,
        requested=device,
        device=resolve_device(device, dtype) if lent is None else lent.device,
        strided=strided,
        flips=flips,
        out_shape=out_shape,
        lent=lent,
        max_concurrent_requests=checked_int("max_concurrent_requests", max_concurrent_requests),
        trusted_input=checked_bool("trusted_input", trusted_input),
        max_decoded_size=checked_int("max_decoded_size", max_decoded_size),
    )
