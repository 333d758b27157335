"""Reads whole zarr arrays from local disk (or S3 through moto with --s3) with
zarrs_nvcomp.read_chunks_parallel and with zarrs-python and zarr-python.

    python benches/read_bench.py [--size-mb 1024] [--dir DIR] [--repeats 3] [--s3]

Arrays (zstd level 1, written once with zarr-python and kept in DIR): a
float32 random-walk field rounded to 0.01, and uint16 Poisson counts over a
smooth background; each with 1 MiB and 64 KiB chunks.

With a usable GPU and CuPy the destination is GPU memory: this reader on the
GPU; this reader's CPU path then one ``cupy.asarray``; zarrs-python
(``codec_pipeline.path = zarrs.ZarrsCodecPipeline``) then ``cupy.asarray``;
zarr-python's default pipeline then ``cupy.asarray``. Otherwise the
destination is host memory (this reader's CPU path, zarrs-python,
zarr-python). Timings are the best of --repeats after one warm-up read, the
methods taking turns; the files are in the page cache by then. zarrs-python is optional (``pip install
zarrs``).

--s3 starts moto_server on 127.0.0.1, uploads the 1 MiB-chunk arrays and
compares this reader's ``s3://`` read (CPU path) with plain concurrent GETs of
the same objects (boto3, a thread pool), which do not decode.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import zarr
import zarr.codecs
import zarrs_nvcomp
from bench_data import bench_parser, best_of, data_dir
from zarrs_nvcomp._buffers import cupy_module

COLUMNS = 2048


def field(rows: int, rng: np.random.Generator) -> np.ndarray:
    data = np.empty((rows, COLUMNS), dtype=np.float32)
    data[0] = np.cumsum(rng.standard_normal(COLUMNS, dtype=np.float32))
    for start in range(1, rows, 4096):
        stop = min(rows, start + 4096)
        steps = rng.standard_normal((stop - start, COLUMNS), dtype=np.float32) * 0.1
        np.cumsum(steps, axis=0, out=steps)
        data[start:stop] = data[start - 1] + steps
    return np.round(data, 2)


def counts(rows: int, rng: np.random.Generator) -> np.ndarray:
    y = np.linspace(0, 6 * np.pi, rows, dtype=np.float32)[:, None]
    x = np.linspace(0, 4 * np.pi, COLUMNS, dtype=np.float32)[None, :]
    data = np.empty((rows, COLUMNS), dtype=np.uint16)
    for start in range(0, rows, 4096):
        stop = min(rows, start + 4096)
        background = 200 + 150 * np.sin(y[start:stop]) * np.cos(x)
        data[start:stop] = rng.poisson(background).astype(np.uint16)
    return data


DATASETS = {"field-f32": (field, 4), "counts-u16": (counts, 2)}
CHUNKS = {"1MiB": 1 << 20, "64KiB": 1 << 16}


def write_arrays(root: Path, size_mb: int) -> dict[str, Path]:
    paths = {}
    for name, (make, itemsize) in DATASETS.items():
        rows = max(64, size_mb * (1 << 20) // (itemsize * COLUMNS))
        data = None
        for chunk_name, chunk_bytes in CHUNKS.items():
            chunk_rows = max(1, chunk_bytes // (itemsize * COLUMNS))
            chunks = (
                (chunk_rows, COLUMNS)
                if chunk_rows > 1
                else (1, chunk_bytes // itemsize)
            )
            path = root / f"{name}-{chunk_name}-{size_mb}mb.zarr"
            paths[f"{name} {chunk_name}"] = path
            if (path / "zarr.json").exists():
                continue
            if data is None:
                t0 = time.perf_counter()
                data = make(rows, np.random.default_rng(1))
                print(
                    f"generated {name} {data.shape} in {time.perf_counter() - t0:.1f} s"
                )
            ratio = write_array(
                path, data, chunks=chunks, compressors=zarr.codecs.ZstdCodec(level=1)
            )
            print(f"wrote {path.name}: chunks {chunks}, ratio {ratio:.2f}")
    return paths


def write_array(path: Path, data: np.ndarray, **create) -> float:
    """Writes ``data`` to a new zarr array at ``path`` (replacing one there),
    created with ``create`` (chunks, codecs); returns the compression ratio."""
    z = zarr.create_array(
        str(path), shape=data.shape, dtype=data.dtype, overwrite=True, **create
    )
    z[...] = data
    stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return data.nbytes / stored


def interleaved_best_of(repeats: int, fns: dict[str, object]) -> dict[str, float]:
    """Best time of each function; the functions take turns, so that a
    changing machine load affects them alike."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def zarrs_python_available() -> bool:
    try:
        import zarrs  # noqa: F401
    except ImportError:
        return False
    return True


def zarr_reader(path: Path, pipeline: str | None):
    """A function reading the whole array with zarr-python and `pipeline`."""
    if pipeline is None:
        z = zarr.open_array(str(path), mode="r")
        return lambda: z[...]
    with zarr.config.set({"codec_pipeline.path": pipeline}):
        z = zarr.open_array(str(path), mode="r")
    return lambda: z[...]


def methods(path: Path, gpu: bool) -> dict[str, object]:
    array = zarrs_nvcomp.open_array(str(path))
    zarrs_pipeline = "zarrs.ZarrsCodecPipeline" if zarrs_python_available() else None
    out: dict[str, object] = {}
    if gpu:
        cp = cupy_module()

        def sync(x):
            cp.cuda.runtime.deviceSynchronize()
            return x

        out["ours gpu"] = lambda: sync(array.read(..., device="cuda"))
        out["ours cpu+copy"] = lambda: sync(cp.asarray(array.read(..., device="cpu")))
        if zarrs_pipeline:
            read = zarr_reader(path, zarrs_pipeline)
            out["zarrs-python+copy"] = lambda: sync(cp.asarray(read()))
        read_zarr = zarr_reader(path, None)
        out["zarr-python+copy"] = lambda: sync(cp.asarray(read_zarr()))
    else:
        out["ours cpu"] = lambda: array.read(..., device="cpu")
        if zarrs_pipeline:
            out["zarrs-python"] = zarr_reader(path, zarrs_pipeline)
        out["zarr-python"] = zarr_reader(path, None)
    return out


def run_local(
    paths: dict[str, Path],
    repeats: int,
    gpu: bool,
    label_width: int = 18,
    note: Callable[[Path], str] = lambda path: "",
) -> None:
    """Prints a row of GB/s of each reader of each array in ``paths``, this
    reader's speed over zarrs-python's and ``note(path)``."""
    dest = "GPU memory" if gpu else "host memory"
    print(f"\nlocal disk -> {dest}; GB/s of decoded data, best of {repeats}")
    if not zarrs_python_available():
        print("(zarrs-python not installed: pip install zarrs)")
    for label, path in paths.items():
        nbytes = zarr.open_array(str(path), mode="r").nbytes
        times = interleaved_best_of(repeats, methods(path, gpu))
        row = "  ".join(f"{n} {nbytes / t / 1e9:6.2f}" for n, t in times.items())
        ours = "ours gpu" if gpu else "ours cpu"
        ref = "zarrs-python+copy" if gpu else "zarrs-python"
        ratio = (
            f"  ratio ours/zarrs-python {times[ref] / times[ours]:.2f}x"
            if ref in times
            else ""
        )
        print(f"{label:{label_width}s} {row}{ratio}{note(path)}")


def fetch(client, bucket: str, key: str) -> int:
    return len(client.get_object(Bucket=bucket, Key=key)["Body"].read())


@contextlib.contextmanager
def moto_server():
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    if server is None:
        raise SystemExit("moto_server is not installed (pip install 'moto[server]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), 0.2),
            ):
                break
            if time.monotonic() > deadline:
                raise SystemExit("moto_server did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def run_s3(paths: dict[str, Path], repeats: int, threads: int) -> None:
    import boto3

    with moto_server() as endpoint:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="x",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bench")
        options = {
            "endpoint": endpoint,
            "allow_http": "true",
            "access_key_id": "x",
            "secret_access_key": "x",
            "region": "us-east-1",
        }
        print(
            f"\nS3 (moto on loopback) -> host memory, best of {repeats}; GET: {threads} threads"
        )
        for label, path in paths.items():
            if "1MiB" not in label:
                continue
            keys = []
            for file in sorted(path.rglob("*")):
                if file.is_file():
                    key = f"{path.name}/{file.relative_to(path).as_posix()}"
                    client.put_object(Bucket="bench", Key=key, Body=file.read_bytes())
                    keys.append(key)
            chunk_keys = [k for k in keys if not k.endswith("zarr.json")]
            stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            nbytes = zarr.open_array(str(path), mode="r").nbytes
            array = zarrs_nvcomp.open_array(
                f"s3://bench/{path.name}", storage_options=options
            )
            t_ours = best_of(lambda a=array: a.read(..., device="cpu"), repeats)

            def get_all(keys=chunk_keys):
                with ThreadPoolExecutor(threads) as pool:
                    return sum(
                        pool.map(functools.partial(fetch, client, "bench"), keys)
                    )

            t_get = best_of(get_all, repeats)
            print(
                f"{label:18s} ours {nbytes / t_ours / 1e9:6.2f} GB/s decoded "
                f"({stored / t_ours / 1e9:.2f} GB/s fetched); boto3 GET only "
                f"{stored / t_get / 1e9:.2f} GB/s fetched; ratio {t_get / t_ours:.2f}x"
            )


def gpu_destination(cpu_only: bool) -> bool:
    """Whether the benchmarks read into GPU memory (a usable GPU and CuPy,
    unless ``cpu_only``); prints the machine's CPUs and load."""
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    return (
        not cpu_only
        and cupy_module() is not None
        and zarrs_nvcomp.gpu_unavailable_reason(0) is None
    )


def read_parser(doc: str) -> argparse.ArgumentParser:
    """The options of the read benchmarks: ``--dir``, ``--repeats``,
    ``--size-mb`` and ``--cpu``."""
    parser = bench_parser(doc, "arrays are")
    parser.add_argument(
        "--size-mb", type=int, default=1024, help="decoded size of each array"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="host memory even with a GPU"
    )
    return parser


def main() -> None:
    parser = read_parser(__doc__)
    parser.add_argument(
        "--s3", action="store_true", help="also read through moto's S3 server"
    )
    parser.add_argument("--s3-only", action="store_true", help="only the S3 part")
    parser.add_argument(
        "--threads", type=int, default=32, help="GET threads of the S3 baseline"
    )
    args = parser.parse_args()

    gpu = gpu_destination(args.cpu)
    with data_dir(args.dir, "zarrs-nvcomp-bench-") as root:
        paths = write_arrays(root, args.size_mb)
        if not args.s3_only:
            run_local(paths, args.repeats, gpu)
        if args.s3 or args.s3_only:
            run_s3(paths, args.repeats, args.threads)


if __name__ == "__main__":
    main()
