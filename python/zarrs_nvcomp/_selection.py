"""Basic-indexing selections (integers, slices, an ellipsis) as the ascending
strided ranges the reader and the writer take, for axes of any length (a
slice of an axis longer than ``sys.maxsize`` is no ``OverflowError``)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from zarrs_nvcomp._zarrs_nvcomp import SelectionError

__all__ = ["checked_slice", "normalize"]


def normalize(
    selection: Any, shape: tuple[int, ...]
) -> tuple[list[tuple[int, int, int]], tuple[int, ...], tuple[int, ...]]:
    """The ascending ``(start, stop, step)`` per axis of a basic-indexing
    selection (integers select one index), the axes whose slices step
    backwards (read ascending, then flipped), and the selection's shape."""
    if not isinstance(selection, tuple):
        selection = (selection,)
    ellipses = [i for i, s in enumerate(selection) if s is Ellipsis]
    if len(ellipses) > 1:
        raise SelectionError("an index can only have a single ellipsis ('...')")
    if ellipses:
        i = ellipses[0]
        fill = len(shape) - (len(selection) - 1)
        selection = (*selection[:i], *(slice(None),) * max(fill, 0), *selection[i + 1 :])
    if len(selection) > len(shape):
        raise SelectionError(
            f"too many indices for array: array is {len(shape)}-dimensional, "
            f"but {len(selection)} were indexed"
        )
    selection = (*selection, *(slice(None),) * (len(shape) - len(selection)))
    strided: list[tuple[int, int, int]] = []
    flips: list[int] = []
    out_shape: list[int] = []
    for axis, (sel, n) in enumerate(zip(selection, shape, strict=True)):
        if isinstance(sel, slice):
            start, stop, step = checked_slice(sel).indices(n)
            # Not len(range(...)): it overflows past sys.maxsize elements.
            count = max(0, -((start - stop) // step))
            out_shape.append(count)
            last = start + (count - 1) * step
            if count == 0:
                strided.append((0, 0, 1))
            elif count == 1:
                strided.append((start, start + 1, 1))
            elif step > 0:
                strided.append((start, last + 1, step))
            else:
                strided.append((last, start + 1, -step))
                flips.append(axis)
            continue
        if isinstance(sel, bool | np.bool_) or sel is None:
            raise SelectionError(
                f"only integers, slices (`:`) and ellipsis (`...`) are valid indices, not {sel!r}"
            )
        try:
            index = operator.index(sel)
        except TypeError:
            raise SelectionError(
                "only integers, slices (`:`) and ellipsis (`...`) are valid indices, "
                f"not {type(sel).__name__}"
            ) from None
        if not -n <= index < n:
            raise SelectionError(f"index {index} is out of bounds for axis {axis} with size {n}")
        index %= n
        strided.append((index, index + 1, 1))
    return strided, tuple(flips), tuple(out_shape)


def checked_slice(sel: slice) -> slice:
    """``sel``, whose bounds and step must be integers or None, the step not 0."""
    try:
        checked = slice(
            *(None if v is None else operator.index(v) for v in (sel.start, sel.stop, sel.step))
        )
    except TypeError:
        raise SelectionError(f"slice indices must be integers or None, not {sel!r}") from None
    if checked.step == 0:
        raise SelectionError("slice step cannot be zero")
    return checked
