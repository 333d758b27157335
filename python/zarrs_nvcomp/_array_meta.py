"""What an ``Array`` says of itself beyond its elements, in zarr's words:
its attributes (``attrs``, read and written in the store as zarr does) and
its summary (``info``)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError

if TYPE_CHECKING:
    from zarrs_nvcomp.reader import Array

__all__ = ["ArrayInfo", "Attributes"]


class Attributes(MutableMapping[str, Any]):
    """An array's user attributes (zarr's ``attrs``): a mapping of JSON
    values read from its metadata, where every change is stored at once (the
    ``attributes`` of a v3 ``zarr.json``, a v2 array's ``.zattrs``), as
    zarr stores them. An array opened with ``mode="r"`` refuses changes."""

    __slots__ = ("_array",)

    def __init__(self, array: Array) -> None:
        self._array = array

    def _current(self) -> dict[str, Any]:
        return dict(self._array._metadata.get("attributes") or {})

    def __getitem__(self, key: str) -> Any:
        return self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __setitem__(self, key: str, value: Any) -> None:
        self.put({**self._current(), key: value})

    def __delitem__(self, key: str) -> None:
        attributes = self._current()
        del attributes[key]
        self.put(attributes)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:  # type: ignore[override]
        """Sets every item of ``other`` and ``kwargs``, in one store."""
        self.put({**self._current(), **dict(other, **kwargs)})

    def put(self, attributes: Mapping[str, Any]) -> None:
        """Replaces all attributes with ``attributes``, in one store."""
        self._array._store_attributes(dict(attributes))

    def asdict(self) -> dict[str, Any]:
        """The attributes as a new dict."""
        return self._current()

    def __repr__(self) -> str:
        return repr(self._current())


def attributes_json(attributes: dict[str, Any]) -> str:
    """``attributes`` as the JSON object the store holds; a value JSON cannot
    hold is an ``InvalidArgumentError`` naming it."""
    if not all(isinstance(key, str) for key in attributes):
        raise InvalidArgumentError("attribute names must be strings")
    try:
        return json.dumps(attributes, allow_nan=True)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"attributes must be JSON values: {e}") from None


class ArrayInfo:
    """A summary of an array, as zarr's ``Array.info``: printed as a table."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[tuple[str, Any]]) -> None:
        self._rows = rows

    def __repr__(self) -> str:
        width = max(len(name) for name, _ in self._rows)
        return "\n".join(f"{name:<{width}} : {value}" for name, value in self._rows)

    def __str__(self) -> str:
        return repr(self)


def array_info(array: Array) -> ArrayInfo:
    """The summary of ``array``."""
    batched = array.batched_algorithm
    return ArrayInfo(
        [
            ("Type", "zarrs_nvcomp.Array"),
            ("Zarr format", array.zarr_format),
            ("Data type", array.dtype),
            ("Fill value", array.fill_value),
            ("Shape", array.shape),
            ("Chunk shape", array.chunks),
            ("Read-only", array.read_only),
            ("URL", array.url),
            ("Codecs", [codec.get("name", codec.get("id")) for codec in array.codecs]),
            ("Decoded", f"in batches ({batched})" if batched else array.fallback_reason),
            ("No. bytes", array.nbytes),
        ]
    )
