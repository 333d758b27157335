"""What a zarr user expects of the package's face: ``__version__``, NumPy
scalars for integer indexes, ``from zarrs_nvcomp import *`` without the
optional dependencies, an ImportError naming the extra that ``to_dask``
needs, progress lines in readable sizes, and the zarr 3 codec at top level
taken by zarr's own ``create_array``."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import _progress

# Runs in a fresh interpreter where importing zarr, dask or tqdm fails.
_WITHOUT = """
import sys

class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"zarr", "dask", "tqdm"}:
            raise ImportError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, _Blocker())
"""


def _run_without_optional(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_is_the_installed_distributions():
    assert zarrs_nvcomp.__version__ == importlib.metadata.version("zarrs-nvcomp")


def test_integer_indexes_give_numpy_scalars_as_numpy_does():
    array = zarrs_nvcomp.create_array(
        "memory://face-scalars", data=np.arange(20, dtype="float32").reshape(4, 5), chunks=2
    )
    value = array[2, 3]
    assert type(value) is np.float32 and value == 13
    assert array[-1, -1] == 19 and np.isscalar(array[np.int64(1), 0])
    assert isinstance(array[2], np.ndarray) and array[2].shape == (5,)
    zero_d = zarrs_nvcomp.create_array("memory://face-0d", data=np.array(7, dtype="int16"))
    assert type(zero_d[()]) is np.int16 and zero_d[()] == 7
    assert isinstance(zero_d[...], np.ndarray) and zero_d[...].shape == ()


def test_star_import_works_without_zarr_dask_and_tqdm():
    done = _run_without_optional(
        """
        from zarrs_nvcomp import *
        import zarrs_nvcomp
        assert "zarr" not in sys.modules and "dask" not in sys.modules
        assert create_array and open_array and NvCompBatchCodec and to_dask
        print(zarrs_nvcomp.__version__)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == zarrs_nvcomp.__version__


def test_to_dask_without_dask_names_the_extra(tmp_path):
    path = tmp_path / "d.zarr"
    zarrs_nvcomp.create_array(str(path), data=np.arange(10), chunks=5)
    done = _run_without_optional(
        f"""
        import zarrs_nvcomp
        try:
            zarrs_nvcomp.to_dask({str(path)!r})
        except ImportError as e:
            print(e)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "zarrs-nvcomp[dask]" in done.stdout


@pytest.mark.parametrize(
    "use",
    [
        "zarrs_nvcomp.NvcompCodecPipeline",
        "zarrs_nvcomp.NvCompBatchZarrCodec",
        "zarrs_nvcomp.set_zarr_batch_size()",
    ],
)
def test_zarr_parts_without_zarr_name_the_extra(use):
    done = _run_without_optional(
        f"""
        import zarrs_nvcomp
        try:
            {use}
        except ImportError as e:
            print(type(e).__name__, e)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "ImportError" in done.stdout and "zarrs-nvcomp[zarr]" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [(0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (1 << 30, "1.0 GiB"), (5 << 40, "5.0 TiB")],
)
def test_human_sizes(nbytes, text):
    assert _progress.human_size(nbytes) == text


def test_progress_without_tqdm_prints_a_readable_size():
    done = _run_without_optional(
        """
        from zarrs_nvcomp import _progress
        _progress.DELAY = 0.0
        bar = _progress._Bar("read")
        bar(512 << 20, 1 << 30)
        bar.close()
        """
    )
    assert done.returncode == 0, done.stderr
    assert "50.0% of 1.0 GiB" in done.stderr and "1073741824" not in done.stderr


@pytest.mark.parametrize("as_list", [False, True], ids=["codec", "list"])
def test_zarrs_own_create_array_takes_the_top_level_zarr_codec(tmp_path, as_list):
    codec = zarrs_nvcomp.NvCompBatchZarrCodec("lz4", device="cpu")
    data = np.arange(1000, dtype="int32").reshape(10, 100)
    path = str(tmp_path / "z.zarr")
    zarr.create_array(path, data=data, chunks=(5, 50), compressors=[codec] if as_list else codec)
    back = zarr.open_array(path, mode="r")
    np.testing.assert_array_equal(back[:], data)
    assert back.metadata.to_dict()["codecs"][-1]["name"] == "nvcomp_batch"
    np.testing.assert_array_equal(zarrs_nvcomp.open_array(path)[...], data)


def test_every_exported_error_and_warning_is_on_the_api_page():
    page = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    documented = {line.rsplit(".", 1)[-1] for line in page.splitlines() if line.startswith(":::")}
    errors = {
        name
        for name in zarrs_nvcomp.__all__
        if isinstance(getattr(zarrs_nvcomp, name), type)
        and issubclass(getattr(zarrs_nvcomp, name), (Exception, Warning))
    }
    assert "ContainsArrayError" in errors
    assert errors <= documented, errors - documented


#: Sphinx cross-reference roles, which mkdocstrings shows as raw text.
SPHINX_ROLE = re.compile(r":(class|func|meth|exc|attr|mod|data|obj):`")


def test_docstrings_are_markdown_without_sphinx_roles():
    package = Path(zarrs_nvcomp.__file__).parent
    sources = sorted(package.glob("*.py")) + sorted(package.glob("*.pyi"))
    assert len(sources) > 20
    found = [
        f"{source.name}:{number}: {line.strip()}"
        for source in sources
        for number, line in enumerate(source.read_text().splitlines(), 1)
        if SPHINX_ROLE.search(line)
    ]
    # The extension's own docstrings (written in Rust) too.
    native = zarrs_nvcomp._zarrs_nvcomp
    for name in dir(native):
        doc = getattr(getattr(native, name), "__doc__", None) or ""
        if SPHINX_ROLE.search(doc):
            found.append(f"_zarrs_nvcomp.{name}")
    assert found == []
