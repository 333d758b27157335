"""The documented examples, run as written: the numcodecs one for every algorithm, and every
fenced Python block of README.md and docs/ (doc_examples.py says how a block is marked)."""

from __future__ import annotations

from pathlib import Path

import doc_examples
import pytest
from conftest import ALL_ALGORITHMS, CPU_ALGORITHMS, cupy_or_skip

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


# --- the fenced Python blocks of README.md and docs/ (doc_examples.py) ------

DOC_BLOCKS = doc_examples.all_blocks()


def pages_with(*kinds: str) -> list[Path]:
    return sorted({b.page for b in DOC_BLOCKS if b.kind in kinds})


def run_page(page: Path, kinds: set[str]) -> int:
    """Runs the page's blocks of ``kinds`` in order in one namespace; returns how many ran."""
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    with doc_examples.zarr_config_restored():
        for block in doc_examples.blocks(page):
            if block.kind in kinds:
                doc_examples.run(block, namespace)
                ran += 1
    return ran


def page_id(page: Path) -> str:
    return str(page.relative_to(doc_examples.ROOT))


def test_the_pages_have_examples_and_few_are_skipped():
    assert len(doc_examples.PAGES) > 10, doc_examples.PAGES
    by_kind = {kind: [b.name for b in DOC_BLOCKS if b.kind == kind] for kind in doc_examples.KINDS}
    assert len(by_kind["cpu"]) >= 20, by_kind
    assert len(by_kind["skip"]) <= 3, by_kind["skip"]


def test_no_python_block_escapes_the_runner():
    # A block fenced ```py or ```Python would be rendered as Python but never run.
    for page in doc_examples.PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            fence = line.strip()
            if fence.startswith("```") and fence.lower().startswith("```py"):
                assert fence == "```python", f"{page}:{number}: {fence}"


def test_markers_are_read_and_bad_ones_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\na = 1\n```\n\n<!-- example: gpu -->\n```python\nb = 2\n```\n"
        "<!-- example: skip needs a cluster -->\n\n```python\nc = 3\n```\n```sh\nls\n```\n"
    )
    found = doc_examples.blocks(page)
    assert [(b.kind, b.reason, b.line, b.code) for b in found] == [
        ("cpu", "", 1, "a = 1\n"),
        ("gpu", "", 6, "b = 2\n"),
        ("skip", "needs a cluster", 11, "c = 3\n"),
    ]
    for bad, why in [
        ("<!-- example: gpus -->", "unknown example marker 'gpus'"),
        ("<!-- example: skip -->", "must say why"),
    ]:
        page.write_text(f"{bad}\n```python\nx = 1\n```\n")
        with pytest.raises(ValueError, match=why):
            doc_examples.blocks(page)
    page.write_text("```python\nx = 1\n")
    with pytest.raises(ValueError, match="unclosed fence"):
        doc_examples.blocks(page)


@pytest.mark.parametrize("page", pages_with("cpu"), ids=page_id)
def test_documented_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_page(page, {"cpu"}) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("page", pages_with("gpu"), ids=page_id)
def test_documented_gpu_examples_run(page, tmp_path, monkeypatch):
    cupy_or_skip()
    monkeypatch.chdir(tmp_path)
    assert run_page(page, {"cpu", "gpu"}) > 0


S3_BLOCKS = [b for b in DOC_BLOCKS if b.kind == "s3"]


@pytest.mark.parametrize("block", S3_BLOCKS, ids=lambda b: b.name)
def test_documented_s3_examples_run(block, moto_endpoint, tmp_path, monkeypatch):
    endpoint, _ = moto_endpoint
    # What a user's environment holds for S3, read by object_store and botocore alike.
    for name, value in {
        "AWS_ENDPOINT": endpoint,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    with doc_examples.zarr_config_restored():
        doc_examples.run(block, {"__name__": "__main__"})
