"""The reader against awkward keys and bad servers: object keys with spaces,
``%`` and non-ASCII next to their percent-encoded twins (S3 and local),
plain HTTP without ``allow_http``, Ctrl-C during a stalled read, the
time an open of a stalled server takes, and a server that throttles."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import interrupt, interruptible_python, s3_options, upload

from zarrs_nvcomp import StoreError, StoreTimeoutError, open_array, read_chunks_parallel

#: Names that a percent-decoding or -encoding reader confuses with each other.
TWIN_NAMES = ["a b.zarr", "a%20b.zarr", "ü.zarr", "%C3%BC.zarr", "100%.zarr"]


def write_distinct(directory: Path) -> dict[str, np.ndarray]:
    """One small array per name of :data:`TWIN_NAMES`, each with its own data."""
    arrays = {}
    for i, name in enumerate(TWIN_NAMES):
        data = np.full((6, 5), i, dtype=np.int16) + np.arange(5, dtype=np.int16)
        z = zarr.create_array(
            str(directory / name), shape=data.shape, chunks=(4, 4), dtype=data.dtype
        )
        z[:] = data
        arrays[name] = data
    return arrays


def test_s3_keys_are_used_as_written(tmp_path, moto_endpoint):
    endpoint, client = moto_endpoint
    arrays = write_distinct(tmp_path)
    for name in TWIN_NAMES:
        upload(client, tmp_path / name, "bucket", f"keys/{name}")
    options = s3_options(endpoint)
    for name, data in arrays.items():
        got = read_chunks_parallel(
            f"s3://bucket/keys/{name}", storage_options=options, device="cpu"
        )
        np.testing.assert_array_equal(got, data, err_msg=name)


@pytest.mark.parametrize("form", ["path", "file_url"])
def test_local_names_are_used_as_written(tmp_path, form):
    arrays = write_distinct(tmp_path)
    for name, data in arrays.items():
        path = str(tmp_path / name)
        url = path if form == "path" else f"file://{path}"
        np.testing.assert_array_equal(read_chunks_parallel(url, device="cpu"), data, err_msg=url)


def test_plain_http_without_allow_http_says_so():
    s3 = {"endpoint": "http://127.0.0.1:9", "access_key_id": "x", "secret_access_key": "x"}
    with pytest.raises(ValueError, match="allow_http"):
        open_array("s3://bucket/a.zarr", storage_options=s3)
    with pytest.raises(ValueError, match="allow_http"):
        open_array("http://127.0.0.1:9/a.zarr")


# --- stalled servers --------------------------------------------------------


class SilentServer:
    """Accepts connections on loopback and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent_server():
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture
def stalling_http(tmp_path):
    """An HTTP server of a zarr array whose metadata it serves and whose
    chunk requests it never answers; yields the array's URL."""
    data = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    z = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=data.shape, chunks=(8, 8), dtype=data.dtype
    )
    z[:] = data
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            file = tmp_path / self.path.lstrip("/")
            if not file.name.startswith("zarr.json"):
                release.wait(60)  # a chunk: stall
                return
            body = file.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/a.zarr"
    release.set()
    server.shutdown()
    server.server_close()


#: Reads the array at argv[1] with the storage options argv[2]; prints the
#: monotonic time at which KeyboardInterrupt arrived.
READER = """
import json, sys, time
from zarrs_nvcomp import read_chunks_parallel
print("ready", flush=True)
try:
    read_chunks_parallel(sys.argv[1], storage_options=json.loads(sys.argv[2]), device="cpu")
    print("returned", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
"""


def interrupt_read(url: str, options: dict[str, str]) -> float:
    """Seconds between a SIGINT sent 0.5 s into a read and its KeyboardInterrupt."""
    child = interruptible_python(READER, url, json.dumps(options))
    assert child.stdout.readline().strip() == "ready"
    out, sent = interrupt(child, 20, "the read")
    word, _, at = out.strip().partition(" ")
    assert word == "interrupted", out
    return float(at) - sent


def test_ctrl_c_interrupts_an_open_of_a_silent_server(silent_server):
    options = s3_options(f"http://127.0.0.1:{silent_server.port}")
    assert interrupt_read("s3://bucket/a.zarr", options) < 1.0


def test_ctrl_c_interrupts_a_read_of_stalled_chunks(stalling_http):
    assert interrupt_read(stalling_http, {"allow_http": "true"}) < 1.0


def test_open_of_a_silent_server_takes_one_budget_and_names_the_request(silent_server):
    options = {
        **s3_options(f"http://127.0.0.1:{silent_server.port}"),
        "timeout": "2s",
        "max_retries": "3",
    }
    start = time.monotonic()
    with pytest.raises(StoreTimeoutError) as info:
        open_array("s3://bucket/stalled.zarr", storage_options=options)
    took = time.monotonic() - start
    # One request's budget: 4 attempts of 2 s and their backoff (9.4 s at most).
    assert took < 10.5, f"took {took:.1f} s"
    message = str(info.value)
    assert "GET" in message, message
    assert "stalled.zarr/zarr.json" in message, message


def test_a_stalled_chunk_fetch_is_a_timeout(stalling_http):
    options = {"allow_http": "true", "timeout": "1s", "max_retries": "1"}
    start = time.monotonic()
    with pytest.raises(StoreTimeoutError, match="c/0/0"):
        read_chunks_parallel(stalling_http, (slice(0, 8), slice(0, 8)), storage_options=options)
    assert time.monotonic() - start < 10


# --- throttling servers -----------------------------------------------------


def serve_throttled(root: Path, gets: dict[str, int]) -> http.server.ThreadingHTTPServer:
    """An HTTP server of ``root`` that answers every first GET of a path
    with 503 SlowDown, as S3 answers a client over its request rate, and
    counts the GETs of each path in ``gets``."""
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                gets[self.path] = seen = gets.get(self.path, 0) + 1
            file = root / self.path.lstrip("/")
            if seen == 1:
                status, body = 503, b"<Error><Code>SlowDown</Code></Error>"
            elif file.is_file():
                status, body = 200, file.read_bytes()
            else:
                status, body = 404, b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("retries", [None, "0"])
def test_throttled_requests_are_retried_each_chunk_fetched_once(tmp_path, retries):
    """By default the read retries each refused request and returns the
    array, each chunk served once, after one refusal; without retries the
    first refusal is the error."""
    data = np.arange(48 * 40, dtype=np.int32).reshape(48, 40)
    z = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=data.shape, chunks=(8, 8), dtype=data.dtype
    )
    z[:] = data
    gets: dict[str, int] = {}
    server = serve_throttled(tmp_path, gets)
    url = f"http://127.0.0.1:{server.server_address[1]}/a.zarr"
    options = {"allow_http": "true", **({"max_retries": retries} if retries else {})}
    try:
        if retries == "0":
            with pytest.raises(StoreError, match="503"):
                read_chunks_parallel(url, storage_options=options, device="cpu")
            return
        got = read_chunks_parallel(url, storage_options=options, device="cpu")
    finally:
        server.shutdown()
        server.server_close()
    np.testing.assert_array_equal(got, data)
    chunks = {path: n for path, n in gets.items() if "/c/" in path}
    assert len(chunks) == 6 * 5, sorted(chunks)
    assert set(chunks.values()) == {2}, chunks
