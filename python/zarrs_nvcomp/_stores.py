"""Where an array lives, as the reader's URL and object_store options: from a
URL, a zarr store (``LocalStore``, ``FsspecStore`` over S3 or local files,
``ObjectStore``), an obstore store, or a ``zarr.Array``; and storage options
in fsspec/s3fs spellings translated to object_store's keys.

| fsspec / s3fs | object_store |
|---|---|
| ``anon=True`` | ``skip_signature="true"`` |
| ``key``, ``secret``, ``token`` | ``access_key_id``, ``secret_access_key``, ``session_token`` |
| ``endpoint_url`` (also in ``client_kwargs``) | ``endpoint`` (and ``allow_http`` for ``http://``) |
| ``client_kwargs={"region_name": ...}`` | ``region`` |
"""

from __future__ import annotations

import datetime
import numbers
import os
from collections.abc import Mapping
from typing import Any

from zarrs_nvcomp._local_paths import expand_user
from zarrs_nvcomp._references import reference_options
from zarrs_nvcomp._zarrs_nvcomp import InvalidArgumentError, UnsupportedTypeError

__all__ = ["location", "translate_storage_options"]

#: fsspec/s3fs keys with an object_store equivalent.
_RENAMED = {
    "key": "access_key_id",
    "secret": "secret_access_key",
    "token": "session_token",
    "endpoint_url": "endpoint",
}

#: botocore client arguments (s3fs's ``client_kwargs``) with an object_store equivalent.
_CLIENT_KWARGS = {
    "endpoint_url": "endpoint",
    "region_name": "region",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
}

#: fsspec keys about its own caching and event loop, which do not change
#: what is read.
_FSSPEC_ONLY = frozenset(
    {
        "asynchronous",
        "loop",
        "skip_instance_cache",
        "use_listings_cache",
        "listings_expiry_time",
        "max_paths",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
    }
)


def translate_storage_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """object_store options (strings) from ``options``, which may use the
    fsspec/s3fs spellings of the module's table; other keys pass through as
    object_store keys (unknown ones are errors when the store opens).
    ``ValueError`` for unknown ``client_kwargs`` and for a setting given twice."""
    if options is not None and not isinstance(options, Mapping):
        raise UnsupportedTypeError(
            f"storage_options must be a dict or None, not {type(options).__name__}"
        )
    translated: dict[str, str] = {}
    fsspec_endpoint = False

    def put(key: str, value: Any, given_as: str) -> None:
        if key in translated:
            raise InvalidArgumentError(
                f"storage option {given_as!r} sets {key!r}, which another option sets too"
            )
        if not isinstance(value, str | numbers.Real | datetime.timedelta):
            raise UnsupportedTypeError(
                f"storage option {given_as!r} must be a string, a number, a bool or a "
                f"timedelta, not {type(value).__name__}"
            )
        translated[key] = _option_value(value)

    for name, value in (options or {}).items():
        if not isinstance(name, str):
            raise UnsupportedTypeError(f"storage option names are strings, not {name!r}")
        if name in _FSSPEC_ONLY:
            continue
        if name == "anon":
            if value:
                put("skip_signature", True, name)
        elif name == "client_kwargs":
            if not isinstance(value, dict):
                raise InvalidArgumentError("storage option 'client_kwargs' must be a dict")
            for inner, inner_value in value.items():
                if inner not in _CLIENT_KWARGS:
                    raise InvalidArgumentError(
                        f"unknown key {inner!r} in storage option 'client_kwargs'; known: "
                        f"{', '.join(sorted(_CLIENT_KWARGS))}"
                    )
                put(_CLIENT_KWARGS[inner], inner_value, f"client_kwargs.{inner}")
                fsspec_endpoint |= inner == "endpoint_url"
        elif name in _RENAMED:
            put(_RENAMED[name], value, name)
            fsspec_endpoint |= name == "endpoint_url"
        else:
            put(name.lower(), value, name)
    endpoint = translated.get("endpoint", "")
    if fsspec_endpoint and endpoint.startswith("http://"):
        translated.setdefault("allow_http", "true")
    return translated


def location(store: Any, storage_options: Mapping[str, Any] | None) -> tuple[str, dict[str, str]]:
    """The reader's URL and object_store options of ``store``: a path or URL
    (with ``storage_options``), a zarr store, an obstore store or a zarr
    array (whose store carries its own options: ``storage_options`` must be
    None). ``TypeError`` for stores the reader cannot open."""
    if isinstance(store, str) and store.startswith("reference://"):
        return store, reference_options(storage_options, translate_storage_options)
    if isinstance(store, str):
        return expand_user(store), translate_storage_options(storage_options)
    if hasattr(store, "__fspath__"):
        return expand_user(os.fspath(store)), translate_storage_options(storage_options)
    if storage_options:
        raise InvalidArgumentError(
            f"storage_options apply to a URL; a {type(store).__name__} carries its own"
        )
    path = ""
    store_path = getattr(store, "store_path", None)  # zarr.Array, zarr.AsyncArray
    if store_path is not None:
        store, path = store_path.store, store_path.path
    url, options = _store_location(store)
    if path:
        url = f"{url.rstrip('/')}/{path.strip('/')}"
    return url, options


def _store_location(store: Any) -> tuple[str, dict[str, str]]:
    kind = f"{type(store).__module__}.{type(store).__qualname__}"
    name = type(store).__name__
    if kind.startswith("zarr.storage") and name == "LocalStore":
        return os.fspath(store.root), {}
    if kind.startswith("zarr.storage") and name == "FsspecStore":
        return _fsspec_location(store.fs, store.path)
    if kind.startswith("zarr.storage") and name == "ObjectStore":
        return _obstore_location(store.store)
    if kind.startswith("obstore"):
        return _obstore_location(store)
    raise UnsupportedTypeError(
        f"the reader cannot open a {name}: give a path, a URL, a zarr LocalStore, "
        "FsspecStore (S3 or local files) or ObjectStore, or an obstore S3Store, LocalStore or "
        "HTTPStore (arrays in memory read in batches through zarr with "
        "zarrs_nvcomp.NvcompCodecPipeline)"
    )


def _fsspec_location(fs: Any, path: str) -> tuple[str, dict[str, str]]:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    path = path.strip("/")
    if {"s3", "s3a"} & set(protocols):
        return f"s3://{path}", translate_storage_options(dict(fs.storage_options))
    if {"file", "local"} & set(protocols):
        return "/" + path, {}
    raise UnsupportedTypeError(
        f"the reader cannot open an fsspec {protocols[0]!r} file system; it reads S3 and "
        "local files"
    )


def _obstore_location(store: Any) -> tuple[str, dict[str, str]]:
    name = type(store).__name__
    prefix = str(getattr(store, "prefix", None) or "").strip("/")
    if name == "LocalStore":
        return "/" + prefix, {}
    if name == "HTTPStore":
        return str(store.url), {
            k: _option_value(v) for k, v in (store.client_options or {}).items()
        }
    if name == "S3Store":
        if getattr(store, "credential_provider", None) is not None:
            raise UnsupportedTypeError(
                "the reader cannot use an obstore S3Store's credential_provider; pass the "
                "credentials as storage options with the URL instead"
            )
        config = {k.lower(): v for k, v in (store.config or {}).items()}
        bucket = config.pop("bucket", None) or config.pop("aws_bucket", None)
        if not bucket:
            raise UnsupportedTypeError("the obstore S3Store names no bucket")
        options = {k: _option_value(v) for k, v in config.items()}
        options.update({k: _option_value(v) for k, v in (store.client_options or {}).items()})
        url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        return url, options
    raise UnsupportedTypeError(f"the reader cannot open an obstore {name}")


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds()}s"
    return str(value)
