"""Reads from an S3-compatible endpoint at cloud latency: a local server
(``s3_server.py``) that serves a directory as bucket ``bucket`` and waits
``--delay-ms`` before answering each request, carries at most ``--mbps``
per request body and per response, and answers ``--error-rate`` of
requests with 503 SlowDown; so that the client is measured, not the server.

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
the bytes served over the link, and two round trips. ``--writes`` also
writes the arrays, and the plain one as one shard (``whole``: a multipart
upload for ours from 64 MiB of encoded bytes on).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs as zc
import zarrs_nvcomp
from bench_data import field_f32
from s3_server import BUCKET, Server

#: Requests in flight of the two latency bounds printed.
IN_FLIGHT = (64, 256)


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
    parser.add_argument(
        "--mbps", type=float, default=0, help="per request body and response; 0: no cap"
    )
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
    compared. Prints the best seconds and requests. ``whole`` is the plain
    array written as one shard: one object of the array's encoded size,
    which ours puts in parts (multipart) from 64 MiB on."""

    def layout(name: str, data: np.ndarray) -> dict:
        shards = {"plain": None, "sharded": (256, 4096), "whole": data.shape}[name]
        return {} if shards is None else {"shards": shards}

    def ours(name: str, path: str, data: np.ndarray) -> None:
        url = f"s3://{BUCKET}/{path}"
        array = zarrs_nvcomp.create_array(
            url, storage_options=options, shape=data.shape, dtype="f4",
            chunks=(4, 4096), compressors="zstd", **layout(name, data),
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
                compressors=zc.ZstdCodec(level=1), **layout(name, data),
            )  # fmt: skip
            z[...] = data

    def local(name: str, path: str, data: np.ndarray) -> None:
        array = zarrs_nvcomp.create_array(
            str(server.root / path), shape=data.shape, dtype="f4",
            chunks=(4, 4096), compressors="zstd", **layout(name, data),
        )  # fmt: skip
        zarrs_nvcomp.write_chunks_parallel(array, data, device="cpu")

    writers = {
        "ours": ours,
        **({"zarr+obstore": peer} if peers else {}),
        "ours, local": local,
    }
    print(f"{'write':<10}{'writer':<14}{'seconds':>9}{'requests':>10}{'ratio':>7}")
    for name, data in {**arrays, "whole": arrays["plain"]}.items():
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
