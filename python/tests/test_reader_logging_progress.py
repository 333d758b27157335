"""The reader behaves like a Python library: its Rust log records reach
``logging`` under ``zarrs_nvcomp``, and reads report progress to a callback
or a progress bar."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr

import zarrs_nvcomp
from zarrs_nvcomp import _progress, read_chunks_parallel


def write(path, shape=(64, 50), chunks=(8, 10), **kwargs) -> np.ndarray:
    data = np.arange(np.prod(shape), dtype="int32").reshape(shape)
    z = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=data.dtype, **kwargs)
    z[...] = data
    return data


def test_fallback_reason_is_logged_under_zarrs_nvcomp(tmp_path, caplog):
    write(tmp_path / "a", compressors=None)
    reason = zarrs_nvcomp.open_array(str(tmp_path / "a")).fallback_reason
    assert reason is not None
    with caplog.at_level(logging.INFO, logger="zarrs_nvcomp"):
        read_chunks_parallel(str(tmp_path / "a"), device="cpu")
    records = [r for r in caplog.records if r.name.startswith("zarrs_nvcomp")]
    assert any(
        f"reading through the zarrs pipeline: {reason}" in r.getMessage() for r in records
    ), [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.INFO for r in records)


def test_log_level_changes_apply_to_the_next_read(tmp_path, caplog):
    write(tmp_path / "a", compressors=None)
    with caplog.at_level(logging.WARNING, logger="zarrs_nvcomp"):
        read_chunks_parallel(str(tmp_path / "a"), device="cpu")
    assert not [r for r in caplog.records if r.name.startswith("zarrs_nvcomp")]
    # The level cached by the first read does not hide the records of the next.
    with caplog.at_level(logging.DEBUG, logger="zarrs_nvcomp"):
        read_chunks_parallel(str(tmp_path / "a"), device="cpu")
    assert [r for r in caplog.records if r.name.startswith("zarrs_nvcomp")]


def test_records_from_worker_threads_do_not_deadlock(tmp_path):
    """Decoding threads log each wave at DEBUG while four Python threads read
    at once and the main thread runs Python code: each record takes the GIL
    on a Rust thread, which must not wait on a thread holding it."""
    write(tmp_path / "a", shape=(256, 256), chunks=(16, 16))
    script = textwrap.dedent(
        f"""
        import logging, threading
        import zarrs_nvcomp
        records = []
        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record)
        logging.getLogger("zarrs_nvcomp").addHandler(Keep())
        logging.getLogger("zarrs_nvcomp").setLevel(logging.DEBUG)
        a = zarrs_nvcomp.open_array({str(tmp_path / "a")!r})
        def read():
            for _ in range(5):
                a.read(..., device="cpu")
        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        busy = sum(i * i for i in range(200_000))
        for t in threads:
            t.join()
        waves = [r for r in records if "decoded a wave" in r.getMessage()]
        # Records of Rust threads show as Python's dummy threads.
        assert any(r.threadName.startswith("Dummy") for r in waves), [r.threadName for r in waves]
        print("waves", len(waves))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 20


@pytest.mark.parametrize("compressors", ["default", None], ids=["batched", "zarrs pipeline"])
def test_progress_callback_rises_to_the_total(tmp_path, compressors):
    kwargs = {} if compressors == "default" else {"compressors": None}
    data = write(tmp_path / "a", shape=(512, 100), chunks=(16, 100), **kwargs)
    seen: list[tuple[int, int]] = []
    got = read_chunks_parallel(
        str(tmp_path / "a"),
        (slice(3, 500), slice(None)),
        device="cpu",
        progress=lambda done, total: seen.append((done, total)),
    )
    np.testing.assert_array_equal(got, data[3:500])
    total = got.nbytes
    assert seen, "the callback was never called"
    assert {t for _, t in seen} == {total}
    done = [d for d, _ in seen]
    assert done == sorted(done)
    assert done[-1] == total


def test_progress_callback_exception_stops_the_read(tmp_path):
    write(tmp_path / "a")

    def fail(done, total):
        raise KeyboardInterrupt("stop")

    with pytest.raises(KeyboardInterrupt, match="stop"):
        read_chunks_parallel(str(tmp_path / "a"), device="cpu", progress=fail)


def test_progress_argument_is_checked(tmp_path):
    write(tmp_path / "a")
    with pytest.raises(TypeError, match="progress must be"):
        read_chunks_parallel(str(tmp_path / "a"), device="cpu", progress="yes")


def test_progress_true_with_tqdm(tmp_path, monkeypatch, capsys):
    pytest.importorskip("tqdm", reason="tqdm is not installed")
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    data = write(tmp_path / "a")
    got = zarrs_nvcomp.open_array(str(tmp_path / "a")).read(device="cpu", progress=True)
    np.testing.assert_array_equal(got, data)
    err = capsys.readouterr().err
    assert "100%" in err and "12.5k" in err, err


def test_progress_true_without_tqdm(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    data = write(tmp_path / "a")
    got = read_chunks_parallel(str(tmp_path / "a"), device="cpu", progress=True)
    np.testing.assert_array_equal(got, data)
    err = capsys.readouterr().err
    assert f"100.0% of {_progress.human_size(data.nbytes)}" in err, err
    assert data.nbytes == 12800 and "12.5 KiB" in err, err
    assert err.endswith("\n")


def test_progress_true_is_quiet_for_quick_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    write(tmp_path / "a")
    read_chunks_parallel(str(tmp_path / "a"), device="cpu", progress=True)
    assert capsys.readouterr().err == ""
