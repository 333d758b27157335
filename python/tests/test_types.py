"""The types a type checker sees agree with what the package takes at run time."""

from __future__ import annotations

import typing

import zarrs_nvcomp
from zarrs_nvcomp._stores import translate_storage_options
from zarrs_nvcomp.types import Algorithm, StorageOptions


def test_the_algorithm_literal_is_the_cores_algorithms():
    assert list(typing.get_args(Algorithm)) == zarrs_nvcomp.ALGORITHMS


def test_every_storage_option_key_is_taken():
    sample = {
        str: "1",
        bool: True,
        dict: {"region_name": "eu-west-1"},
    }
    for key, kind in typing.get_type_hints(StorageOptions).items():
        value = sample.get(typing.get_origin(kind) or kind, "1")
        translated = translate_storage_options({key: value})
        assert translated, key
    source = typing.get_type_hints(StorageOptions)
    assert {"anon", "endpoint", "region", "timeout", "max_retries"} <= set(source)
