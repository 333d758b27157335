"""A read that runs on the CPU where the GPU was asked for or expected warns
once per process (`CpuPathWarning`), saying why, at the line of the caller's
code; other reads never warn."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import zarr
import zarr.codecs
from conftest import cupy_or_skip

import zarrs_nvcomp
from zarrs_nvcomp import CpuPathWarning, GpuUnavailableError, _cpu_path, _read_out, open_array

DATA = np.arange(24 * 30, dtype="int32").reshape(24, 30)


def write(path, **kwargs) -> str:
    zarr.create_array(str(path), data=DATA, chunks=(8, 10), **kwargs)
    return str(path)


@pytest.fixture(autouse=True)
def first_warning_of_the_process(monkeypatch):
    """Each test starts as a process that has not warned yet."""
    monkeypatch.setattr(_cpu_path, "_warned", False)


@pytest.fixture
def batched(tmp_path) -> str:
    return write(tmp_path / "zstd.zarr", compressors=zarr.codecs.ZstdCodec(level=1))


@pytest.fixture
def transposed(tmp_path) -> str:
    """A chain only the zarrs pipeline decodes."""
    return write(
        tmp_path / "transposed.zarr",
        serializer=zarr.codecs.BytesCodec(),
        filters=[zarr.codecs.TransposeCodec(order=(1, 0))],
        compressors=None,
    )


def cpu_path_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, CpuPathWarning)]


def reads(array, times: int, **kwargs) -> list[str]:
    """Reads `array` `times` times; the CpuPathWarnings given, as messages."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(times):
            got = array.read(**kwargs)
            np.testing.assert_array_equal(got if isinstance(got, np.ndarray) else got.get(), DATA)
    return cpu_path_warnings(record)


def test_cpu_reads_never_warn(batched, transposed):
    for url in (batched, transposed):
        assert reads(open_array(url), 2, device="cpu") == []


@pytest.fixture
def no_gpu():
    reason = zarrs_nvcomp.gpu_unavailable_reason(0)
    if reason is None:
        pytest.skip("a GPU is usable here")
    return reason


def test_auto_reads_on_a_machine_without_cupy_and_gpu_do_not_warn(no_gpu, transposed, monkeypatch):
    # A plain CPU machine: device=None meant the CPU all along.
    monkeypatch.setattr(_cpu_path, "cupy_module", lambda: None)
    assert reads(open_array(transposed), 2) == []


def test_auto_fallback_with_cupy_and_no_gpu_warns_once_per_process(
    no_gpu, batched, transposed, monkeypatch
):
    # CuPy installed says the GPU was expected; the GPU is really unusable here.
    monkeypatch.setattr(_cpu_path, "cupy_module", lambda: object())
    first = open_array(batched)
    got = reads(first, 3)
    assert len(got) == 1, got
    assert batched in got[0] and "read on the CPU, not the GPU" in got[0]
    # The engine's reason, its own advice to use the CPU given once.
    assert no_gpu.removesuffix(', or use device="cpu"') in got[0]
    assert got[0].count('device="cpu"') == 1, got[0]
    # Once per process: a second array stays quiet, and so does the first.
    assert reads(open_array(transposed), 2) == []
    assert reads(first, 1) == []


def index_the_array(array):
    return array[0, 0]  # the line the warning names


def read_in_parallel(path):
    return zarrs_nvcomp.read_chunks_parallel(path)  # the line the warning names


def test_the_warning_points_at_the_callers_line(no_gpu, transposed, monkeypatch):
    monkeypatch.setattr(_cpu_path, "cupy_module", lambda: object())
    array = open_array(transposed)
    for read, argument in ((index_the_array, array), (read_in_parallel, transposed)):
        monkeypatch.setattr(_cpu_path, "_warned", False)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            read(argument)
        (warning,) = [w for w in record if issubclass(w.category, CpuPathWarning)]
        assert warning.filename == __file__, warning.filename
        # The line that read, not its caller's.
        assert warning.lineno == read.__code__.co_firstlineno + 1, (read, warning.lineno)


def test_the_warning_at_a_scripts_top_level_names_its_line(tmp_path, transposed):
    script = tmp_path / "script.py"
    script.write_text(
        "import warnings\n"
        "import zarrs_nvcomp\n"
        "from zarrs_nvcomp import _cpu_path\n"
        "_cpu_path.cupy_module = lambda: object()\n"
        "_cpu_path.gpu_unavailable_reason = lambda _: 'no GPU here'\n"
        "warnings.simplefilter('always')\n"
        f"zarrs_nvcomp.open_array({str(transposed)!r})[0, 0]\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True
    )
    assert f"{script}:7: CpuPathWarning" in result.stderr, result.stderr
    assert result.stderr.count('device="cpu"') == 1, result.stderr


def test_without_cupy_the_warning_names_the_extras_drivers(no_gpu, transposed, monkeypatch):
    monkeypatch.setattr(_cpu_path, "cupy_module", lambda: None)
    monkeypatch.setattr(_cpu_path, "gpu_unavailable_reason", lambda _: None)
    (message,) = reads(open_array(transposed), 1)
    assert "[cu13]" in message and "580 or newer" in message
    assert "[cu12]" in message and "525 or newer" in message


def test_failed_cuda_read_gives_no_warning(no_gpu, transposed):
    array = open_array(transposed)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(GpuUnavailableError):
            array.read(device="cuda")
    assert cpu_path_warnings(record) == []


@pytest.mark.gpu
def test_cuda_read_through_the_zarrs_pipeline_warns_once_per_process(batched, transposed):
    cupy_or_skip()
    array = open_array(transposed)
    got = reads(array, 3, device="cuda")
    assert len(got) == 1, got
    assert "zarrs pipeline" in got[0] and array.fallback_reason in got[0]
    assert reads(open_array(transposed), 1, device="cuda") == []
    assert reads(open_array(batched), 2, device="cuda") == []


@pytest.mark.gpu
def test_auto_read_without_cupy_on_a_gpu_machine_warns(transposed, monkeypatch):
    # Without CuPy the read resolves to the CPU (the reader's check) and the
    # warning says why (the warning's check).
    monkeypatch.setattr(_read_out, "cupy_module", lambda: None)
    monkeypatch.setattr(_cpu_path, "cupy_module", lambda: None)
    got = reads(open_array(transposed), 2)
    assert len(got) == 1 and "CuPy is not installed" in got[0], got
