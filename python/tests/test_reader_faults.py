"""The reader against awkward keys and bad servers: object keys with spaces,
``%`` and non-ASCII next to their percent-encoded twins (S3 and local),
plain HTTP without ``allow_http``, Ctrl-C during a stalled read, the
time an open of a stalled server takes, and servers that refuse or drop
requests (retried)."""

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

from zarrs_nvcomp import (
    StoreError,
    StoreTimeoutError,
    create_array,
    open_array,
    read_chunks_parallel,
    write_chunks_parallel,
)

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


def serve_flaky(
    root: Path, fault: str, requests: dict[str, int]
) -> http.server.ThreadingHTTPServer:
    """An S3-compatible server (bucket ``bucket``: GET, HEAD, PUT) of the
    directory ``root`` that fails every first request of each method and
    key: with 503 SlowDown (``fault="503"``, as S3 answers a client over
    its request rate) or by dropping the connection unanswered
    (``"reset"``). ``requests`` counts the requests of each method and key."""
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length) if length else b""
            name = f"{method} {self.path.partition('?')[0]}"
            with lock:
                requests[name] = seen = requests.get(name, 0) + 1
            if seen == 1 and fault == "reset":
                self.close_connection = True
                return
            file = root / self.path.partition("?")[0].removeprefix("/bucket/")
            if seen == 1:
                status, body = 503, b"<Error><Code>SlowDown</Code></Error>"
            elif method == "PUT":
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(payload)
                status, body = 200, b""
            elif file.is_file():
                status, body = 200, file.read_bytes()
            else:
                status, body = 404, b"<Error><Code>NoSuchKey</Code></Error>"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            if status == 200:
                self.send_header("ETag", f'"{len(body)}"')
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            self.answer("GET")

        def do_HEAD(self) -> None:
            self.answer("HEAD")

        def do_PUT(self) -> None:
            self.answer("PUT")

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("fault", ["503", "reset"])
def test_refused_and_dropped_requests_are_retried_each_chunk_once(tmp_path, fault):
    """By default every refused or dropped request is retried: a create, a
    write and a read each complete, the array read back equal to what was
    written; each chunk is put once and fetched once after its failure."""
    data = np.arange(48 * 40, dtype=np.int32).reshape(48, 40)
    requests: dict[str, int] = {}
    server = serve_flaky(tmp_path, fault, requests)
    url = "s3://bucket/a.zarr"
    options = {
        "endpoint": f"http://127.0.0.1:{server.server_address[1]}",
        "allow_http": "true",
        "skip_signature": "true",
        "region": "us-east-1",
    }
    try:
        array = create_array(
            url, storage_options=options, shape=data.shape, chunks=(8, 8), dtype="i4"
        )
        write_chunks_parallel(array, data, device="cpu")
        got = read_chunks_parallel(url, storage_options=options, device="cpu")
    finally:
        server.shutdown()
        server.server_close()
    np.testing.assert_array_equal(got, data)
    for method in ("PUT", "GET"):
        chunks = {k: n for k, n in requests.items() if k.startswith(method) and "/c/" in k}
        assert len(chunks) == 6 * 5, sorted(chunks)
        assert set(chunks.values()) == {2}, chunks


def test_without_retries_the_first_refusal_is_a_store_error_naming_the_key(tmp_path):
    data = np.arange(64, dtype=np.int32).reshape(8, 8)
    z = zarr.create_array(
        str(tmp_path / "a.zarr"), shape=data.shape, chunks=(8, 8), dtype=data.dtype
    )
    z[:] = data
    server = serve_flaky(tmp_path, "503", {})
    options = {
        "endpoint": f"http://127.0.0.1:{server.server_address[1]}",
        "allow_http": "true",
        "skip_signature": "true",
        "region": "us-east-1",
        "max_retries": "0",
    }
    try:
        with pytest.raises(StoreError, match="503") as info:
            read_chunks_parallel("s3://bucket/a.zarr", storage_options=options, device="cpu")
    finally:
        server.shutdown()
        server.server_close()
    assert "zarr.json" in str(info.value), info.value
