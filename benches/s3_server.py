"""The benchmarks' S3-compatible endpoint: a local server that serves a
directory as bucket ``bucket`` (GET with ranges, HEAD, PUT, DELETE,
ListObjectsV2 and multipart uploads, unsigned) and waits ``delay`` seconds
before answering each request, carries at most ``mbps`` per request body
and per response, sends every body over one shared link of ``link_mbps``,
and answers ``error_rate`` of requests with 503 SlowDown and drops
``reset_rate`` of connections unanswered; so that the client is measured,
not the server."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
import threading
import urllib.parse
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path

BUCKET = "bucket"


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
        # Multipart uploads under way: their parts by number.
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.upload_ids = itertools.count(1)
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
        if self.mbps and payload:
            await asyncio.sleep(len(payload) * 8 / (self.mbps * 1e6))
        bucket, _, key = target.split("?")[0].lstrip("/").partition("/")
        query = urllib.parse.parse_qs(target.partition("?")[2], keep_blank_values=True)
        if bucket == BUCKET and key and ("uploads" in query or "uploadId" in query):
            return self._multipart(method, key, query, payload)
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

    def _multipart(
        self, method: str, key: str, query: dict[str, list[str]], payload: bytes
    ) -> tuple[int, dict, bytes]:
        """CreateMultipartUpload, UploadPart, CompleteMultipartUpload (the
        parts the body lists, in its order) and AbortMultipartUpload. The
        object appears whole at completion, never before."""
        xml = {"Content-Type": "application/xml"}
        if method == "POST" and "uploads" in query:
            upload = str(next(self.upload_ids))
            self.uploads[upload] = {}
            return (
                200,
                xml,
                (
                    "<InitiateMultipartUploadResult>"
                    f"<Bucket>{BUCKET}</Bucket><Key>{key}</Key><UploadId>{upload}</UploadId>"
                    "</InitiateMultipartUploadResult>"
                ).encode(),
            )
        upload = query["uploadId"][0]
        if upload not in self.uploads:
            return 404, {}, b"<Error><Code>NoSuchUpload</Code></Error>"
        if method == "PUT":
            number = int(query["partNumber"][0])
            self.uploads[upload][number] = payload
            return 200, {"ETag": f'"{upload}-{number}"'}, b""
        if method == "DELETE":
            del self.uploads[upload]
            return 204, {}, b""
        parts = self.uploads.pop(upload)
        numbers = [
            int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", payload)
        ]
        self.files[key] = b"".join(parts[n] for n in numbers)
        return (
            200,
            xml,
            (
                f"<CompleteMultipartUploadResult><Bucket>{BUCKET}</Bucket><Key>{key}</Key>"
                f'<ETag>"{upload}-{len(numbers)}"</ETag></CompleteMultipartUploadResult>'
            ).encode(),
        )

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
