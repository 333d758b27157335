"""Local paths as a user means them: ``~`` expanded, and clear errors for a
path that does not exist (an ``ArrayNotFoundError``, a ``FileNotFoundError``)
or that holds a zarr group rather than an array (a
``NodeTypeValidationError`` naming the group's arrays)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from zarrs_nvcomp._zarrs_nvcomp import (
    DEFAULT_MAX_METADATA_SIZE,
    ArrayNotFoundError,
    NodeTypeValidationError,
)

__all__ = ["check_array_path", "expand_user"]


def _local(url: str) -> str | None:
    """The local path ``url`` names (a path, or a ``file://`` URL), or None."""
    if url.startswith("file://"):
        return url[len("file://") :]
    return None if "://" in url else url


def expand_user(url: str) -> str:
    """``url`` with a leading ``~`` of a local path expanded, as open() would not."""
    return os.path.expanduser(url) if url.startswith("~") else url


def check_array_path(url: str) -> None:
    """Raises ``ArrayNotFoundError`` where ``url`` is a local path that does
    not exist, and ``NodeTypeValidationError`` naming the arrays of the group
    where it is one; other URLs are for the reader to open."""
    path = _local(url)
    if path is None:
        return
    if not os.path.exists(path):
        raise ArrayNotFoundError(errno.ENOENT, "no zarr array: nothing at this path", path)
    if _is_group(Path(path)):
        arrays = _arrays_below(Path(path))
        listed = ", ".join(arrays[:_ARRAYS_LISTED]) if arrays else "none"
        if len(arrays) > _ARRAYS_LISTED:
            listed += f" and {len(arrays) - _ARRAYS_LISTED} more"
        raise NodeTypeValidationError(f"{path} is a group, not an array; its arrays: {listed}")


#: Arrays a group's error names at most.
_ARRAYS_LISTED = 20


def _arrays_below(group: Path) -> list[str]:
    """The paths, relative to ``group``, of the arrays in it and in the
    groups below it, sorted; arrays' own directories are not entered."""
    arrays, groups = [], [group]
    while groups:
        for child in groups.pop().iterdir():
            if not child.is_dir():
                continue
            if _is_array(child):
                arrays.append(child.relative_to(group).as_posix())
            elif _is_group(child):
                groups.append(child)
    return sorted(arrays)


def _node_type(path: Path) -> str | None:
    """The ``node_type`` of the zarr.json at ``path``, or None where there is
    none or it cannot be read; the reader reports what is wrong with it."""
    try:
        with open(path / "zarr.json", "rb") as document:
            # A larger zarr.json is left unread, for the reader to refuse
            # with its bound (the reader's own) in the error; so is one
            # that is longer than it says (/dev/zero), once read that far.
            if os.fstat(document.fileno()).st_size > DEFAULT_MAX_METADATA_SIZE:
                return None
            text = document.read(DEFAULT_MAX_METADATA_SIZE + 1)
        if len(text) > DEFAULT_MAX_METADATA_SIZE:
            return None
        return json.loads(text).get("node_type")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None


def _is_group(path: Path) -> bool:
    return (path / ".zgroup").is_file() or _node_type(path) == "group"


def _is_array(path: Path) -> bool:
    return (path / ".zarray").is_file() or _node_type(path) == "array"
