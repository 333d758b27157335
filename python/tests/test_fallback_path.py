"""The fallback path (chains without a batched decoder: no compressor, bz2)
held to the batched path's standard: a chunk file the store cannot open is a
``StoreError`` naming its key, on reads and on the read half of a partial
write (it was a ``DecodeError``); Ctrl-C stops a read between chunks (it took
3.3-6.9 s, the batched chains 0.1-0.3 s)."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
from conftest import interrupt, interruptible_python

import zarrs_nvcomp
from zarrs_nvcomp import StoreError

CHAINS = {
    "v2-none": {"zarr_format": 2, "compressors": None},
    "v3-none": {"zarr_format": 3, "compressors": None},
    "v2-bz2": {"zarr_format": 2, "compressors": numcodecs.BZ2(level=1)},
    # The batched path, for comparison.
    "v3-zstd": {"zarr_format": 3, "compressors": "zstd"},
}


def chunk_file(path, zarr_format: int):
    return path / ("0.0" if zarr_format == 2 else "c/0/0")


@pytest.mark.parametrize("chain", CHAINS)
def test_a_chunk_file_that_cannot_be_opened_is_a_store_error_naming_it(tmp_path, chain):
    path = tmp_path / "a.zarr"
    data = np.arange(64, dtype="f4").reshape(8, 8)
    array = zarrs_nvcomp.create_array(str(path), data=data, chunks=(4, 4), **CHAINS[chain])
    # A link to itself: opening it fails (ELOOP) even for root.
    target = chunk_file(path, CHAINS[chain]["zarr_format"])
    target.unlink()
    target.symlink_to(target.name)
    key = "0.0" if CHAINS[chain]["zarr_format"] == 2 else "c/0/0"
    with pytest.raises(StoreError, match=key):
        array.read(device="cpu")
    with pytest.raises(StoreError, match=key):
        array[1:3, 1:3] = 0
    np.testing.assert_array_equal(array.read((slice(4, 8), ...), device="cpu"), data[4:])


#: Writes a bz2 array of about 192 MiB at argv[1], reads it into memory
#: faulted in beforehand with Ctrl-C arriving 0.5 s in; prints when
#: KeyboardInterrupt arrived. The output is lent so that the read is all
#: chunks: zeroing a fresh 192 MiB output is one call, which took 2 s on a
#: development VM whose kernel cleared pages slowly.
READER = """
import sys, time
import numcodecs, numpy as np
import zarrs_nvcomp
data = (np.arange(48 << 20, dtype="f4") % 1000).reshape(-1, 1 << 16)
zarrs_nvcomp.create_array(sys.argv[1], data=data, chunks=(8, 1 << 16), zarr_format=2,
                          compressors=numcodecs.BZ2(level=1))
array = zarrs_nvcomp.open_array(sys.argv[1])
out = np.ones(data.shape, "f4")
start = time.perf_counter()
array.read((slice(0, 64),), device="cpu")
print("ready", time.perf_counter() - start, flush=True)
try:
    array.read(device="cpu", out=out)
    print("returned", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
"""


def test_ctrl_c_stops_a_fallback_read_between_chunks(tmp_path):
    child = interruptible_python(READER, str(tmp_path / "a.zarr"))
    ready = child.stdout.readline().split()
    assert ready and ready[0] == "ready", ready
    # A twelfth of the rows took this long: the whole read, twelve times it.
    whole = 12 * float(ready[1])
    out, sent = interrupt(child, 60, "the bz2 read")
    word, _, at = out.strip().partition(" ")
    assert word == "interrupted", (out, whole)
    assert float(at) - sent < min(1.0, whole / 2), (float(at) - sent, whole)
