"""The reader's arrays opened for zarr's codec pipeline, kept across zarr's
opens of the same array.

zarr makes an array's codec pipeline on every ``zarr.open_array``; the
reader's own open of the array (its metadata document read again, parsed
by zarrs, its chain classified) costs about as much again, on every open,
where a read of a few hundred chunks on the GPU takes a few milliseconds.
So the arrays the pipeline opens are kept, by URL and options, with zarr's
metadata of the array when it was opened: an array is taken from here
only while zarr's metadata of it is equal to that (an array rewritten
since, resized or of other codecs, is opened again). A kept array reads
its chunks afresh on every read, as an array opened once does; reader
arrays read in forked children as in their parent.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["UNREADABLE", "open_for_pipeline"]

#: What an array the reader cannot open is kept as.
UNREADABLE = object()

#: Most arrays kept: the least recently used goes first.
_MAX_KEPT = 64

_kept: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], tuple[Any, Any]] = OrderedDict()
_lock = threading.Lock()
_log = logging.getLogger("zarrs_nvcomp.pipeline")


async def open_for_pipeline(
    url: str, options: dict[str, str], metadata: Any, open_async: Any
) -> Any:
    """The reader's array at ``url`` with ``options``, which zarr knows by
    ``metadata``: the one kept, where it was opened under equal metadata;
    else ``await open_async(url, options)``, kept (``UNREADABLE`` where that
    raises ``OSError``, ``TypeError`` or ``ValueError``: metadata zarr reads
    and zarrs does not)."""
    key = (url, tuple(sorted(options.items())))
    with _lock:
        kept = _kept.get(key)
        if kept is not None and kept[0] == metadata:
            _kept.move_to_end(key)
            return kept[1]
    try:
        array = await open_async(url, options)
    except (OSError, TypeError, ValueError) as e:
        _log.debug("zarrs_nvcomp: the reader cannot open %s: %s", url, e)
        array = UNREADABLE
    with _lock:
        _kept[key] = (metadata, array)
        _kept.move_to_end(key)
        while len(_kept) > _MAX_KEPT:
            _kept.popitem(last=False)
    return array
