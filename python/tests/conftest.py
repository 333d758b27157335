"""Shared fixtures and helpers: the `gpu` marker skips, with the engine's reason, where no GPU
is usable."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import zarrs_nvcomp

CPU_ALGORITHMS = ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"]
ALL_ALGORITHMS = [*CPU_ALGORITHMS, "cascaded", "bitcomp", "ans"]

#: A zarr v3 blosc compressor (lz4, byte shuffle, 4-byte items): a chain the
#: writer hands to the zarrs pipeline.
BLOSC_LZ4_SHUFFLE = {
    "name": "blosc",
    "configuration": {
        "cname": "lz4",
        "clevel": 5,
        "shuffle": "shuffle",
        "typesize": 4,
        "blocksize": 0,
    },
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gpu: needs a usable CUDA GPU (skipped, with the reason, otherwise)"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        reason = zarrs_nvcomp.gpu_unavailable_reason(0)
        if reason is not None:
            pytest.skip(f"no usable GPU: {reason}")


def cupy_or_skip():
    return pytest.importorskip("cupy", reason="CuPy is not installed")


def cuda_codec(algorithm: str, **options):
    """CuPy and a codec of ``algorithm`` on the GPU; skips the test without CuPy."""
    cp = cupy_or_skip()
    return cp, zarrs_nvcomp.NvCompBatchCodec(algorithm, device="cuda", **options)


def create_like(path, data, **create):
    """A new zarr array at ``path`` of ``data``'s shape and dtype, created with
    ``create`` (chunks, codecs, fill value); nothing is written to it."""
    import zarr

    return zarr.create_array(path, shape=data.shape, dtype=data.dtype, **create)


def interruptible_python(script: str, *args: str) -> subprocess.Popen:
    """Starts ``python -c script args...`` with its stdout piped, taking
    SIGINT as ``KeyboardInterrupt``, even where this runner ignores SIGINT,
    as jobs started in the background do: a child inherits the ignored
    signal, and Python then leaves it ignored. The script installs the
    handler itself (``preexec_fn`` is not safe beside the fixtures'
    server threads)."""
    handler = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    return subprocess.Popen(
        [sys.executable, "-c", handler + script, *args], stdout=subprocess.PIPE, text=True
    )


def interrupt(child: subprocess.Popen, timeout: float, what: str) -> tuple[str, float]:
    """Sends SIGINT to ``child`` 0.5 s from now; returns the rest of its output
    and when the signal was sent. Fails the test, saying that ``what`` was not
    interrupted, unless the child ends within ``timeout`` s of the signal."""
    try:
        time.sleep(0.5)
        sent = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"{what} was not interrupted within {timeout} s of SIGINT")
    return out, sent


# --- S3 through moto's server ---------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def moto_endpoint():
    boto3 = pytest.importorskip("boto3")
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    if server is None:
        pytest.skip("moto_server is not installed")
    port = _free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                # Installed but not serving is a broken environment, not a
                # reason to skip the S3 tests.
                log.seek(0)
                output = log.read().decode(errors="replace")[-2000:]
                status = proc.poll()
                pytest.fail(f"moto_server is installed but did not start ({status=}):\n{output}")
            time.sleep(0.1)
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="x",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bucket")
        yield endpoint, client
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def upload(client, local: Path, bucket: str, prefix: str) -> None:
    for file in sorted(local.rglob("*")):
        if file.is_file():
            key = f"{prefix}/{file.relative_to(local).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=file.read_bytes())


def s3_options(endpoint: str) -> dict[str, str]:
    return {
        "endpoint": endpoint,
        "allow_http": "true",
        "access_key_id": "x",
        "secret_access_key": "x",
        "region": "us-east-1",
    }


# --- zarrs_nvcomp.NvcompCodecPipeline ---------------------------------------


@pytest.fixture
def paths(monkeypatch):
    """How the pipeline read and wrote: ``("reader", selection)`` for a call
    of the chunk-parallel reader, ``("engine", n)`` for an engine call
    decoding n chunks that zarr's store API fetched, ``("encode", n)`` for
    one encoding n chunks, ``("writer", n)`` for a write of n chunks by
    the chunk-parallel writer."""
    from zarrs_nvcomp import _engine_batch
    from zarrs_nvcomp.pipeline import NvcompCodecPipeline

    calls: list[tuple[str, object]] = []
    decode, encode = _engine_batch.engine_decode, _engine_batch.engine_encode
    read_with_reader = NvcompCodecPipeline._read_with_reader
    write_with_writer = NvcompCodecPipeline._write_with_writer

    async def counting_decode(chain, stored, keys, on_device, sizes):
        calls.append(("engine", len(stored)))
        return await decode(chain, stored, keys, on_device, sizes)

    async def recording_reader(self, request, out, codec):
        done = await read_with_reader(self, request, out, codec)
        if done:
            calls.append(("reader", request.selection))
        return done

    async def counting_encode(chain, chunks):
        calls.append(("encode", len(chunks)))
        return await encode(chain, chunks)

    monkeypatch.setattr(_engine_batch, "engine_decode", counting_decode)
    monkeypatch.setattr(_engine_batch, "engine_encode", counting_encode)
    monkeypatch.setattr(NvcompCodecPipeline, "_read_with_reader", recording_reader)

    async def recording_writer(self, items, value, drop_axes):
        done = await write_with_writer(self, items, value, drop_axes)
        if done:
            calls.append(("writer", len(items)))
        return done

    monkeypatch.setattr(NvcompCodecPipeline, "_write_with_writer", recording_writer)
    return calls
