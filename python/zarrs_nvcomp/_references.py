"""fsspec's options of a ``reference://`` URL (a kerchunk reference set,
as ``fsspec.filesystem("reference", fo=...)`` takes them) as the reader's
storage options: ``fo`` a path of the set's JSON, or the set itself as a
dict (whose bytes values become ``base64:`` text); ``remote_protocol``
the scheme of the set's URLs written without one; ``remote_options`` the
options of the stores its URLs name. The set is read from local files
only (``target_protocol`` ``file``)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError, UnsupportedTypeError

__all__ = ["reference_options"]

#: fsspec's reference file system options that do not change what is read.
_FSSPEC_ONLY = frozenset(
    {
        "target_options",
        "skip_instance_cache",
        "simple_templates",
        "max_gap",
        "max_block",
        "cache_size",
    }
)


def reference_options(
    options: Mapping[str, Any] | None, translate: Callable[[Mapping[str, Any]], dict[str, str]]
) -> dict[str, str]:
    """The reader's options of a ``reference://`` URL from fsspec's
    ``options``; ``translate`` turns the remote stores' options into the
    reader's."""
    rest = dict(options or {})
    fo = rest.pop("fo", None)
    translated: dict[str, str] = {}
    if isinstance(fo, Mapping):
        translated["references"] = json.dumps(_as_json(fo))
    elif isinstance(fo, str | os.PathLike):
        translated["fo"] = os.path.expanduser(os.fspath(fo))
    elif fo is None:
        raise InvalidArgumentError(
            "a reference:// URL needs storage_options={'fo': ...}: the reference set's JSON "
            "file, or the set as a dict"
        )
    else:
        raise UnsupportedTypeError(
            f"storage option 'fo' must be a path or a dict of references, not {type(fo).__name__}"
        )
    target = rest.pop("target_protocol", None)
    if target not in (None, "file", "local"):
        raise UnsupportedTypeError(
            f"the reader reads reference sets from local files, not {target!r}; load the set "
            "and pass it as storage_options={'fo': dict}"
        )
    protocol = rest.pop("remote_protocol", None)
    if protocol is not None:
        translated["remote_protocol"] = str(protocol)
    remote = rest.pop("remote_options", None) or {}
    if not isinstance(remote, Mapping):
        raise InvalidArgumentError("storage option 'remote_options' must be a dict")
    for name in _FSSPEC_ONLY:
        rest.pop(name, None)
    if rest:
        raise InvalidArgumentError(
            f"unknown storage options {sorted(rest)} for a reference:// URL; the stores its "
            "URLs name take theirs as remote_options"
        )
    translated.update(translate(remote))
    return translated


def _as_json(refs: Mapping[str, Any]) -> dict[str, Any]:
    """``refs`` with the bytes values kerchunk keeps in memory as
    ``base64:`` text, in version 1's ``refs`` too."""

    def value(v: Any) -> Any:
        if isinstance(v, bytes | bytearray | memoryview):
            return "base64:" + base64.b64encode(bytes(v)).decode()
        return v

    out = {k: value(v) for k, v in refs.items()}
    if isinstance(out.get("refs"), Mapping):
        out["refs"] = {k: value(v) for k, v in out["refs"].items()}
    return out
