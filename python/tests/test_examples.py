"""The documented examples, run as written (algorithm substituted where parametrized)."""

from __future__ import annotations

import pytest
from conftest import ALL_ALGORITHMS, CPU_ALGORITHMS

EXAMPLE_NUMCODECS = """
import numcodecs
import numpy as np

codec = numcodecs.registry.get_codec(dict(id="nvcomp_batch", algorithm="lz4"))
shape = (4, 8)
chunk1, chunk2 = np.random.randn(2, *shape).astype(np.float32)
data_comp = codec.encode_batch([chunk1, chunk2])
data_decomp = codec.decode_batch(data_comp)
np.testing.assert_equal(data_decomp[0].view(np.float32).reshape(shape), chunk1)
np.testing.assert_equal(data_decomp[1].view(np.float32).reshape(shape), chunk2)
"""

# The zarr 3 counterpart of the zarr 2 example (tests_zarr2/ runs that one as written).
EXAMPLE_ZARR3 = """
import numpy as np
import zarr

codec = zarr.registry.get_codec_class("nvcomp_batch")(algorithm="lz4")
shape = (16, 16)
chunks = (8, 8)
data = np.random.randn(*shape).astype(np.float32)
z1 = zarr.create_array(zarr.storage.MemoryStore(), data=data, chunks=chunks, compressors=codec)
zarr_store = zarr.storage.MemoryStore()
zarr.create_array(zarr_store, data=z1[:], chunks=chunks, compressors=codec)
z2 = zarr.open_array(zarr_store)
np.testing.assert_equal(z1[:], z2[:])
assert z2.metadata.codecs[-1].to_dict()["name"] == "nvcomp_batch"
"""

# zarr 3 reading and writing zarr format 2 with the numcodecs codec.
EXAMPLE_ZARR3_FORMAT2 = """
import numcodecs
import numpy as np
import zarr

codec = numcodecs.registry.get_codec(dict(id="nvcomp_batch", algorithm="lz4"))
shape = (16, 16)
chunks = (8, 8)
data = np.random.randn(*shape).astype(np.float32)
zarr_store = zarr.storage.MemoryStore()
z1 = zarr.create_array(zarr_store, shape=shape, chunks=chunks, dtype=data.dtype,
                       compressors=codec, zarr_format=2)
z1[:] = data
z2 = zarr.open_array(zarr_store)
np.testing.assert_equal(data, z2[:])
"""


def run(example: str, algorithm: str) -> None:
    code = example.replace('algorithm="lz4"', f'algorithm="{algorithm}"')
    exec(compile(code, f"<example {algorithm}>", "exec"), {})


def test_numcodecs_example_as_written():
    exec(compile(EXAMPLE_NUMCODECS, "<example>", "exec"), {})


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_numcodecs_example_cpu(algorithm, monkeypatch):
    import zarrs_nvcomp.numcodecs as mod

    # Force the CPU backend even where a GPU is usable.
    orig = mod.NvCompBatchCodec.__init__

    def cpu_init(self, algorithm="lz4", options=None, device=None):
        orig(self, algorithm, options, "cpu")

    monkeypatch.setattr(mod.NvCompBatchCodec, "__init__", cpu_init)
    run(EXAMPLE_NUMCODECS, algorithm)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ALL_ALGORITHMS)
def test_numcodecs_example_gpu(algorithm):
    import numcodecs

    assert numcodecs.registry.get_codec(dict(id="nvcomp_batch", algorithm=algorithm)).backend == (
        "cuda:0"
    )
    run(EXAMPLE_NUMCODECS, algorithm)


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_zarr3_example(algorithm):
    run(EXAMPLE_ZARR3, algorithm)


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_zarr3_format2_example(algorithm):
    run(EXAMPLE_ZARR3_FORMAT2, algorithm)
