"""zarr-python's helpers that the codec pipeline shares, across the zarr 3
releases that moved them: 3.1 keeps them in ``zarr.core.codec_pipeline`` (the
merge as a method of ``BatchedCodecPipeline``), later releases in
``zarr.core.chunk_utils``; later releases also have ``read`` return one
``{"status": "present" | "missing"}`` per chunk."""

from __future__ import annotations

from typing import Any

from zarr.core.codec_pipeline import BatchedCodecPipeline

try:
    from zarr.core.chunk_utils import _merge_chunk_array, fill_value_or_default
except ImportError:  # zarr 3.1
    from zarr.core.codec_pipeline import fill_value_or_default

    def _merge_chunk_array(*args: Any) -> Any:
        # A method in zarr 3.1 that does not use its instance.
        return BatchedCodecPipeline._merge_chunk_array(None, *args)  # type: ignore[arg-type]


__all__ = ["fill_value_or_default", "get_results", "merge_chunk_array"]


def merge_chunk_array(
    existing: Any,
    value: Any,
    out_selection: Any,
    spec: Any,
    chunk_selection: Any,
    complete: bool,
    drop_axes: tuple[int, ...],
) -> Any:
    """zarr's merge of new values into a chunk (the existing chunk, or one of
    fill values), as its own pipeline merges them."""
    return _merge_chunk_array(
        existing, value, out_selection, spec, chunk_selection, complete, drop_axes
    )


def get_results(present: list[bool]) -> tuple[dict[str, str], ...]:
    """What ``CodecPipeline.read`` returns per chunk (zarr 3.1 ignores it)."""
    return tuple({"status": "present" if p else "missing"} for p in present)
