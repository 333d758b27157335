"""Types of the package's arguments, for type checkers: the algorithms'
names and the storage options the package takes.

>>> from zarrs_nvcomp.types import Algorithm, StorageOptions
>>> options: StorageOptions = {"anon": True, "region": "us-east-1"}
"""

from __future__ import annotations

import datetime
from typing import Any, Literal, TypedDict

from zarrs_nvcomp._progress import ProgressCallback

__all__ = ["Algorithm", "ReadOptions", "StorageOptions"]

#: nvCOMP's batched algorithms; the last three run on the GPU only.
Algorithm = Literal[
    "lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate", "cascaded", "bitcomp", "ans"
]

#: A value of a storage option: object_store takes text; booleans, numbers
#: and ``datetime.timedelta`` durations are written as it parses them.
OptionValue = str | bool | int | float | datetime.timedelta


class StorageOptions(TypedDict, total=False):
    """The ``storage_options`` of a URL: object_store's keys, or the
    fsspec/s3fs spellings translated to them. Any other object_store key
    (``aws_`` prefixed S3 keys, HTTP client keys) is passed on as well; a
    type checker knows these."""

    access_key_id: str
    """The AWS access key (fsspec: ``key``)."""
    secret_access_key: str
    """The AWS secret key (fsspec: ``secret``)."""
    session_token: str
    """A temporary session's token (fsspec: ``token``)."""
    region: str
    """The bucket's region, e.g. ``"us-east-1"``."""
    endpoint: str
    """An S3-compatible server's URL, ``"http://localhost:9000"`` (fsspec: ``endpoint_url``)."""
    allow_http: OptionValue
    """Whether plain ``http://`` endpoints are allowed."""
    skip_signature: OptionValue
    """Send unsigned requests: public buckets, no credentials (fsspec: ``anon``)."""
    virtual_hosted_style_request: OptionValue
    """Address the bucket as ``bucket.host`` rather than ``host/bucket``."""
    timeout: OptionValue
    """The longest one request may take: seconds, a duration text (``"30s"``) or a
    timedelta, at most a week (as every duration option)."""
    connect_timeout: OptionValue
    """The longest a connection may take to open."""
    retry_timeout: OptionValue
    """The longest a request is retried for; it also bounds a whole open."""
    max_retries: OptionValue
    """The most retries of one request, 0 to 1,000 (default 10, with jittered
    exponential backoff: throttling (503 SlowDown), server errors and
    timeouts are retried)."""
    max_metadata_size: OptionValue
    """The most bytes a metadata document (``zarr.json``, ``.zarray``, ...) may
    have; larger ones are refused before they are read (default 64 MiB)."""
    anon: bool
    """fsspec's spelling of ``skip_signature``."""
    key: str
    """fsspec's spelling of ``access_key_id``."""
    secret: str
    """fsspec's spelling of ``secret_access_key``."""
    token: str
    """fsspec's spelling of ``session_token``."""
    endpoint_url: str
    """fsspec's spelling of ``endpoint``."""
    client_kwargs: dict[str, Any]
    """botocore's client arguments: ``endpoint_url``, ``region_name`` and the credentials."""


class ReadOptions(TypedDict, total=False):
    """The keyword arguments of `zarrs_nvcomp.read_chunks_parallel`
    beyond ``storage_options``: those of `zarrs_nvcomp.Array.read`."""

    device: str | None
    """Where to decode and return the result: None, ``"cpu"``, ``"cuda"``, ``"cuda:N"``."""
    max_concurrent_requests: int | None
    """The most chunk requests in flight at once (default 256; fewer for
    chunks of more than 1 MiB, so that at most 256 MiB of chunks are in
    flight)."""
    trusted_input: bool
    """Every chunk is valid: the GPU decodes in this process, not a worker."""
    max_decoded_size: int | None
    """The largest decoded size of one chunk, in bytes."""
    progress: bool | ProgressCallback | None
    """True for a progress bar, or a callable(done_bytes, total_bytes)."""
    out: Any
    """An array to read into, returned."""
