"""Checks of the keyword arguments that reach the Rust core as integers and
booleans: a value of the wrong kind, or out of range, is an error that names
the argument (the bindings' own conversions raise built-in ``TypeError`` and
``OverflowError`` that name neither the argument nor the package)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError, UnsupportedTypeError

__all__ = ["checked_bool", "checked_int", "checked_mapping", "checked_optional_str"]

#: The largest integer the core takes (an unsigned 64-bit count of bytes or requests).
U64_MAX = 2**64 - 1


def checked_int(name: str, value: Any, *, minimum: int = 0, maximum: int = U64_MAX) -> int | None:
    """``value`` (``None``, or an integer from ``minimum`` to ``maximum``) as an int."""
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise UnsupportedTypeError(f"{name} must be an integer or None, not {value!r}")
    value = int(value)
    if not minimum <= value <= maximum:
        raise InvalidArgumentError(f"{name} must be from {minimum} to {maximum}, not {value}")
    return value


def checked_bool(name: str, value: Any) -> bool:
    """``value`` (``True`` or ``False``, NumPy's too) as a bool."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise UnsupportedTypeError(f"{name} must be True or False, not {value!r}")


def checked_mapping(name: str, value: Any) -> dict[Any, Any]:
    """``value`` (``None`` or a mapping) as a new dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UnsupportedTypeError(f"{name} must be a dict or None, not {value!r}")
    return dict(value)


def checked_optional_str(name: str, value: Any) -> str | None:
    """``value`` (``None`` or a string) as it is."""
    if value is None or isinstance(value, str):
        return value
    raise UnsupportedTypeError(f"{name} must be a string or None, not {value!r}")
