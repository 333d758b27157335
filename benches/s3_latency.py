"""Reads from an S3-compatible endpoint at cloud latency: a local server
that serves a directory as bucket ``bucket`` (GET with ranges and HEAD,
unsigned) and waits ``--delay-ms`` before answering each request, at most
``--mbps`` per response, and answers ``--error-rate`` of requests with 503
SlowDown; so that the client is measured, not the server.

    python benches/s3_latency.py [--delay-ms 20] [--mbps 0] [--error-rate 0]
                                 [--size-mb 64] [--repeats 2] [--peers]

Arrays (float32 field, zstd level 1, written by zarr-python): 64 KiB chunks
(``plain``) and 64 KiB inner chunks in 4 MiB shards (``sharded``). Each is
read whole on the CPU by ``read_chunks_parallel`` and, with ``--peers``, by
zarr-python over obstore (``zarr.storage.ObjectStore``), the readers
taking turns; best of ``--repeats`` after a warm-up. Printed: seconds,
requests the server answered for one read, the ratio peer / ours, and the
latency bounds at 64 and at 256 requests in flight (the reader's default
``max_concurrent_requests``): one round trip per that many requests,
and at least one for the metadata and
one for the chunks (shards read whole bring their indexes with them). The
row ``ours, local`` is the same read from the directory the server serves:
the time this machine takes to decode the array, which no client
overlaps entirely with the round trips. With ``--link-mbps`` (one link
that every response crosses in turn), ``link s`` is the bandwidth bound:
the bytes served over the link, and two round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import random
import tempfile
import threading
import time
import urllib.parse
import warnings
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs as zc
import zarrs_nvcomp
from bench_data import field_f32

BUCKET = "bucket"
#: Requests in flight of the two latency bounds printed.
IN_FLIGHT = (64, 256)


class Server:
    """The endpoint: one asyncio server on its own thread (no thread per
    request, so that thousands of requests wait their delay at once)."""

    def __init__(
        self,
        root: Path,
        delay: float,
        mbps: float,
        error_rate: float,
        link_mbps: float = 0,
        reset_rate: float = 0,
    ):
        self.root, self.delay, self.mbps, self.error_rate = (
            root,
            delay,
            mbps,
            error_rate,
        )
        self.link_mbps, self.reset_rate = link_mbps, reset_rate
        # When the shared link is next free (loop time).
        self.link_free = 0.0
        self.requests = 0
        # Bytes of the bodies of GET answers.
        self.served = 0
        self.log: list[str] | None = None
        self.files: dict[str, bytes] = {}
        started = threading.Event()
        self.loop = asyncio.new_event_loop()

        async def serve() -> None:
            self.server = await asyncio.start_server(
                self._connection, "127.0.0.1", 0, backlog=4096
            )
            self.port = self.server.sockets[0].getsockname()[1]
            started.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self.server.serve_forever()

        threading.Thread(
            target=self.loop.run_until_complete, args=(serve(),), daemon=True
        ).start()
        started.wait()

    def _object(self, target: str) -> bytes | None:
        bucket, _, key = target.split("?")[0].lstrip("/").partition("/")
        if bucket != BUCKET or not key:
            return None
        if key not in self.files:
            path = self.root / key
            self.files[key] = path.read_bytes() if path.is_file() else None
        return self.files[key]

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {
                    k.lower(): v.strip()
                    for k, _, v in (x.partition(":") for x in lines[1:] if x)
                }
                length = int(headers.get("content-length", 0))
                payload = await reader.readexactly(length) if length else b""
                if random.random() < self.reset_rate:
                    self.requests += 1
                    return  # the connection dropped, no answer
                status, meta, body = await self._answer(
                    method, target, headers.get("range"), payload
                )
                reply = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
                reply += [f"{k}: {v}" for k, v in meta.items()]
                reply.append(f"Content-Length: {len(body)}")
                writer.write(("\r\n".join(reply) + "\r\n\r\n").encode("latin-1"))
                if method != "HEAD":
                    writer.write(body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, method: str, target: str, ranged: str | None, payload: bytes
    ) -> tuple[int, dict, bytes]:
        self.requests += 1
        if self.log is not None:
            self.log.append(f"{method} {target}")
        await asyncio.sleep(self.delay)
        await self._carry(len(payload))
        if random.random() < self.error_rate:
            return (
                503,
                {},
                b"<Error><Code>SlowDown</Code><Message>Slow Down</Message></Error>",
            )
        bucket, _, key = target.split("?")[0].lstrip("/").partition("/")
        if method == "PUT" and bucket == BUCKET and key and "?" not in target:
            self.files[key] = payload
            return 200, {"ETag": f'"{len(payload)}"'}, b""
        if method == "DELETE" and bucket == BUCKET and key:
            self.files[key] = None
            return 204, {}, b""
        if method == "GET" and bucket == BUCKET and not key and "list-type=2" in target:
            return 200, {"Content-Type": "application/xml"}, self._listing(target)
        data = self._object(target)
        if data is None:
            return (
                404,
                {},
                b"<Error><Code>NoSuchKey</Code><Message>none</Message></Error>",
            )
        size = len(data)
        meta = {"ETag": f'"{size}"', "Last-Modified": formatdate(usegmt=True)}
        status = 200
        if ranged and ranged.startswith("bytes="):
            first, _, last = ranged[len("bytes=") :].partition("-")
            start, end = (
                (max(size - int(last), 0), size) if not first else (int(first), size)
            )
            if first and last:
                end = min(int(last) + 1, size)
            if start >= size and size:
                return 416, {"Content-Range": f"bytes */{size}"}, b""
            meta["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            data, status = data[start:end], 206
        if self.mbps and method == "GET":
            await asyncio.sleep(len(data) * 8 / (self.mbps * 1e6))
        if method == "GET":
            self.served += len(data)
            await self._carry(len(data))
        return status, meta, data

    def _listing(self, target: str) -> bytes:
        """ListObjectsV2's answer (one page, no delimiter) for the prefix."""
        query = urllib.parse.parse_qs(target.partition("?")[2])
        prefix = query.get("prefix", [""])[0]
        keys = {
            p.relative_to(self.root).as_posix()
            for p in self.root.rglob("*")
            if p.is_file()
        }
        keys |= set(self.files)
        items = []
        for key in sorted(k for k in keys if k.startswith(prefix)):
            data = self._object(f"/{BUCKET}/{key}")
            if data is not None:
                items.append(
                    f"<Contents><Key>{key}</Key><Size>{len(data)}</Size>"
                    "<LastModified>2026-01-01T00:00:00.000Z</LastModified>"
                    f"<ETag>&quot;{len(data)}&quot;</ETag></Contents>"
                )
        return (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
            f"<Name>{BUCKET}</Name><Prefix>{prefix}</Prefix>"
            f"<KeyCount>{len(items)}</KeyCount><IsTruncated>false</IsTruncated>"
            + "".join(items)
            + "</ListBucketResult>"
        ).encode()

    async def _carry(self, size: int) -> None:
        """Waits while ``size`` bytes cross the shared link (``link_mbps``),
        behind the bytes already on it."""
        if not self.link_mbps or not size:
            return
        now = self.loop.time()
        self.link_free = max(now, self.link_free) + size * 8 / (self.link_mbps * 1e6)
        await asyncio.sleep(self.link_free - now)

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)


def write_arrays(root: Path, size_mb: int) -> dict[str, np.ndarray]:
    columns = 4096
    rows = (size_mb << 20) // (4 * columns)
    data = field_f32(rows * columns * 4).reshape(rows, columns)
    arrays = {"plain": {}, "sharded": {"shards": (256, columns)}}
    for name, extra in arrays.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z = zarr.create_array(
                str(root / f"{name}.zarr"), shape=data.shape, chunks=(4, columns),
                dtype="f4", compressors=zc.ZstdCodec(level=1), **extra,
            )  # fmt: skip
            z[...] = data
    return {name: data for name in arrays}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=20)
    parser.add_argument("--mbps", type=float, default=0, help="per response; 0: no cap")
    parser.add_argument("--error-rate", type=float, default=0)
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--link-mbps", type=float, default=0, help="one link shared by all; 0: none"
    )
    parser.add_argument("--reset-rate", type=float, default=0)
    parser.add_argument(
        "--peers", action="store_true", help="also zarr-python over obstore"
    )
    parser.add_argument("--writes", action="store_true", help="also write both arrays")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="s3_latency_"))
    arrays = write_arrays(root, args.size_mb)
    server = Server(
        root,
        args.delay_ms / 1e3,
        args.mbps,
        args.error_rate,
        args.link_mbps,
        args.reset_rate,
    )
    endpoint = f"http://127.0.0.1:{server.port}"
    options = {"endpoint": endpoint, "allow_http": "true", "skip_signature": "true"}
    options["region"] = "us-east-1"

    def ours(name: str) -> np.ndarray:
        url = f"s3://{BUCKET}/{name}.zarr"
        return zarrs_nvcomp.read_chunks_parallel(
            url, storage_options=options, device="cpu"
        )

    def peer(name: str) -> np.ndarray:
        from obstore.store import S3Store

        store = S3Store(
            BUCKET, endpoint=endpoint, skip_signature=True, region="us-east-1",
            client_options={"allow_http": True},
        )  # fmt: skip
        z = zarr.open_array(
            zarr.storage.ObjectStore(store, read_only=True), path=f"{name}.zarr"
        )
        return z[...]

    def local(name: str) -> np.ndarray:
        return zarrs_nvcomp.read_chunks_parallel(
            str(root / f"{name}.zarr"), device="cpu"
        )

    readers = {
        "ours": ours,
        **({"zarr+obstore": peer} if args.peers else {}),
        "ours, local": local,
    }
    print(
        f"{args.size_mb} MiB arrays, {args.delay_ms:g} ms a request, "
        f"{args.mbps or 'no'} Mb/s cap per response, "
        f"{args.link_mbps or 'no'} Mb/s link, {args.error_rate:g} errors, "
        f"{args.reset_rate:g} resets"
    )
    print(
        f"{'array':<10}{'reader':<14}{'seconds':>9}{'requests':>10}"
        f"{'bound@64':>10}{'bound@256':>11}{'link s':>8}{'ratio':>7}"
    )
    for name, data in arrays.items():
        best: dict[str, float] = {}
        requests: dict[str, int] = {}
        served: dict[str, int] = {}
        for turn in range(args.repeats + 1):
            for reader, read in readers.items():
                before, served_before = server.requests, server.served
                start = time.perf_counter()
                got = read(name)
                took = time.perf_counter() - start
                np.testing.assert_array_equal(got, data)
                if turn:
                    best[reader] = min(best.get(reader, math.inf), took)
                requests[reader] = server.requests - before
                served[reader] = server.served - served_before
        for reader in readers:
            if reader == "ours, local":
                print(f"{name:<10}{reader:<14}{best[reader]:>9.3f}")
                continue
            # The bytes served, over the link, after the metadata's round trip
            # and the chunks' first.
            link = (
                served[reader] * 8 / (args.link_mbps * 1e6) + 2 * args.delay_ms / 1e3
                if args.link_mbps
                else math.nan
            )
            bound = [
                max(math.ceil(requests[reader] / n), 2) * args.delay_ms / 1e3
                for n in IN_FLIGHT
            ]
            ratio = best.get("zarr+obstore", math.nan) / best[reader]
            print(
                f"{name:<10}{reader:<14}{best[reader]:>9.3f}{requests[reader]:>10}"
                f"{bound[0]:>10.3f}{bound[1]:>11.3f}{link:>8.3f}{ratio:>7.2f}"
            )
    if args.writes:
        write_turns(server, options, arrays, args.repeats, args.peers)
    server.shutdown()


def write_turns(
    server: Server,
    options: dict[str, str],
    arrays: dict[str, np.ndarray],
    repeats: int,
    peers: bool,
) -> None:
    """Writes each array anew (created at a new path, then every chunk put)
    with ours, with ``peers`` zarr-python over obstore, and ours into the served
    directory (``ours, local``: the time to encode and write it without the
    round trips), taking turns; each written array is read back and
    compared. Prints the best seconds and requests."""
    layouts = {"plain": {}, "sharded": {"shards": (256, 4096)}}

    def ours(name: str, path: str, data: np.ndarray) -> None:
        url = f"s3://{BUCKET}/{path}"
        array = zarrs_nvcomp.create_array(
            url, storage_options=options, shape=data.shape, dtype="f4",
            chunks=(4, 4096), compressors="zstd", **layouts[name],
        )  # fmt: skip
        zarrs_nvcomp.write_chunks_parallel(array, data, device="cpu")

    def peer(name: str, path: str, data: np.ndarray) -> None:
        from obstore.store import S3Store

        store = S3Store(
            BUCKET, endpoint=options["endpoint"], skip_signature=True,
            region="us-east-1", client_options={"allow_http": True},
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z = zarr.create_array(
                zarr.storage.ObjectStore(store), name=path,
                shape=data.shape, chunks=(4, 4096), dtype="f4",
                compressors=zc.ZstdCodec(level=1), **layouts[name],
            )  # fmt: skip
            z[...] = data

    def local(name: str, path: str, data: np.ndarray) -> None:
        array = zarrs_nvcomp.create_array(
            str(server.root / path), shape=data.shape, dtype="f4",
            chunks=(4, 4096), compressors="zstd", **layouts[name],
        )  # fmt: skip
        zarrs_nvcomp.write_chunks_parallel(array, data, device="cpu")

    writers = {
        "ours": ours,
        **({"zarr+obstore": peer} if peers else {}),
        "ours, local": local,
    }
    print(f"{'write':<10}{'writer':<14}{'seconds':>9}{'requests':>10}{'ratio':>7}")
    for name, data in arrays.items():
        best: dict[str, float] = {}
        requests: dict[str, int] = {}
        for turn in range(repeats + 1):
            for w, (writer, write) in enumerate(writers.items()):
                path = f"written/{name}-{turn}-{w}.zarr"
                before = server.requests
                start = time.perf_counter()
                write(name, path, data)
                took = time.perf_counter() - start
                requests[writer] = server.requests - before
                if writer == "ours, local":
                    got = zarrs_nvcomp.read_chunks_parallel(str(server.root / path))
                    np.testing.assert_array_equal(got, data)
                    if turn:
                        best[writer] = min(best.get(writer, math.inf), took)
                    continue
                got = zarrs_nvcomp.read_chunks_parallel(
                    f"s3://{BUCKET}/{path}",
                    storage_options=options,
                    device="cpu",
                )
                np.testing.assert_array_equal(got, data)
                if turn:
                    best[writer] = min(best.get(writer, math.inf), took)
        for writer in writers:
            if writer == "ours, local":
                print(f"{name:<10}{writer:<14}{best[writer]:>9.3f}")
                continue
            ratio = best.get("zarr+obstore", math.nan) / best[writer]
            print(
                f"{name:<10}{writer:<14}{best[writer]:>9.3f}{requests[writer]:>10}"
                f"{ratio:>7.2f}"
            )


if __name__ == "__main__":
    main()
