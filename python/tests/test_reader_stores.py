"""open_array / read_chunks_parallel given stores and arrays instead of URLs,
and storage options in fsspec/s3fs spellings."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import zarr
from conftest import upload
from zarr.codecs import ZstdCodec

import zarrs_nvcomp
from zarrs_nvcomp._stores import translate_storage_options


@pytest.fixture(scope="module")
def local_array(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    data = np.arange(40 * 30, dtype="<i4").reshape(40, 30)
    z = zarr.create_array(
        root / "a.zarr", shape=data.shape, chunks=(16, 16), dtype="<i4", compressors=[ZstdCodec()]
    )
    z[...] = data
    return root, data


def test_fsspec_spellings_become_object_store_keys():
    options = translate_storage_options(
        {
            "anon": True,
            "key": "k",
            "secret": "s",
            "token": "t",
            "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
            "asynchronous": True,
        }
    )
    assert options == {
        "skip_signature": "true",
        "access_key_id": "k",
        "secret_access_key": "s",
        "session_token": "t",
        "endpoint": "http://127.0.0.1:9000",
        "region": "eu-west-1",
        "allow_http": "true",
    }
    # object_store's own keys pass through; an https endpoint needs no allow_http.
    assert translate_storage_options({"endpoint_url": "https://h", "anon": False}) == {
        "endpoint": "https://h"
    }
    assert translate_storage_options({"region": "x", "allow_http": False}) == {
        "region": "x",
        "allow_http": "false",
    }


def test_unknown_and_conflicting_options_are_named():
    with pytest.raises(ValueError, match="'verify' in storage option 'client_kwargs'"):
        translate_storage_options({"client_kwargs": {"verify": False}})
    with pytest.raises(ValueError, match="'endpoint'"):
        translate_storage_options({"endpoint_url": "https://a", "endpoint": "https://b"})
    with pytest.raises(ValueError, match="no_such_option"):
        zarrs_nvcomp.open_array("s3://bucket/a.zarr", storage_options={"no_such_option": "1"})


def test_missing_s3_credentials_are_named_with_how_to_give_them():
    # The instance metadata service, the last place credentials are looked
    # for, at a port nobody listens on: as off EC2, without the wait.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    options = {"region": "us-east-1", "metadata_endpoint": endpoint, "max_retries": 0}
    with pytest.raises(zarrs_nvcomp.StoreError, match="no AWS credentials found") as raised:
        zarrs_nvcomp.open_array("s3://bucket/a.zarr", storage_options=options)
    assert "access_key_id" in str(raised.value) and "anon=True" in str(raised.value)


def test_local_stores_and_arrays_open_like_their_path(local_array):
    obstore = pytest.importorskip("obstore")
    from zarr.storage import FsspecStore, LocalStore, ObjectStore

    root, data = local_array
    path = root / "a.zarr"
    stores = [
        LocalStore(path),
        ObjectStore(obstore.store.LocalStore(path)),
        obstore.store.LocalStore(path),
        FsspecStore.from_url(f"file://{path}"),
        zarr.open_array(LocalStore(root), path="a.zarr", mode="r"),
        zarr.open_array(path, mode="r"),
    ]
    for store in stores:
        array = zarrs_nvcomp.open_array(store)
        assert array.url.rstrip("/").endswith("a.zarr"), (store, array.url)
        np.testing.assert_array_equal(array.read((slice(3, 37), 5), device="cpu"), data[3:37, 5])
    got = zarrs_nvcomp.read_chunks_parallel(
        LocalStore(path), (slice(None), slice(2, 9)), device="cpu"
    )
    np.testing.assert_array_equal(got, data[:, 2:9])


def test_stores_carry_their_options(local_array):
    from zarr.storage import LocalStore

    with pytest.raises(ValueError, match="carries its own"):
        zarrs_nvcomp.open_array(LocalStore(local_array[0]), storage_options={"region": "x"})


def test_in_memory_stores_are_a_type_error_naming_the_pipeline():
    store = zarr.storage.MemoryStore()
    z = zarr.create_array(store, shape=(4,), chunks=(2,), dtype="u1")
    for given in (store, z):
        with pytest.raises(TypeError, match=r"MemoryStore.*NvcompCodecPipeline"):
            zarrs_nvcomp.open_array(given)


def test_s3_through_fsspec_spellings_fsspec_and_obstore_stores(local_array, moto_endpoint):
    endpoint, client = moto_endpoint
    root, data = local_array
    upload(client, root / "a.zarr", "bucket", "stores/a.zarr")
    fsspec_options = {
        "key": "x",
        "secret": "x",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    url = "s3://bucket/stores/a.zarr"
    selection = (slice(1, 39, 3), slice(None))
    expected = data[selection]
    got = zarrs_nvcomp.read_chunks_parallel(
        url, selection, storage_options=fsspec_options, device="cpu"
    )
    np.testing.assert_array_equal(got, expected)

    pytest.importorskip("s3fs")
    from zarr.storage import FsspecStore

    fs_store = FsspecStore.from_url(url, storage_options=fsspec_options, read_only=True)
    for store in (fs_store, zarr.open_array(fs_store, mode="r")):
        array = zarrs_nvcomp.open_array(store)
        assert array.url == url
        np.testing.assert_array_equal(array.read(selection, device="cpu"), expected)

    obstore = pytest.importorskip("obstore")
    s3 = obstore.store.S3Store(
        "bucket",
        prefix="stores/a.zarr",
        endpoint=endpoint,
        region="us-east-1",
        access_key_id="x",
        secret_access_key="x",
        client_options={"allow_http": True},
    )
    array = zarrs_nvcomp.open_array(s3)
    assert array.url == url
    np.testing.assert_array_equal(array.read(selection, device="cpu"), expected)
