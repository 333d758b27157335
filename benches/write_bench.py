"""Writes a float32 field (``bench_data.field_f32``) to local disk, zstd
level 1, with zarrs_nvcomp.write_chunks_parallel and with zarrs-python and
zarr-python; and to S3 (moto on loopback) next to plain concurrent PUTs of
the same objects.

    python benches/write_bench.py [--size-mb 1024] [--repeats 3] [--dir DIR] [--no-s3] [--new-arrays]

Cases (GB/s of uncompressed data, best of --repeats after a warm-up, the
writers taking turns):

- GPU (a usable GPU and CuPy): the data in a CuPy array; 1 MiB chunks: ours
  on the GPU, zarrs-python after ``cupy.asnumpy`` (the copy timed), zarr-python
  likewise, and zarr-python with GPU buffers and the ``nvcomp_batch`` zarr 3
  codec (all chunks in one call); 64 KiB inner chunks in 16 MiB shards: ours,
  zarrs-python.
- Next to ours on the GPU: plain writes of the files ours stored, from 32
  threads, without encoding (what the file system gives).
- CPU: the data in a NumPy array, 1 MiB chunks and sharded: ours with
  ``device="cpu"``, zarrs-python, zarr-python.
- S3: ours (CPU path) against boto3 PUTs of the objects ours wrote, from a
  thread pool, which do not encode.

By default each writer overwrites its array (created in the warm-up); with
``--new-arrays`` every call of every writer writes a new array (or, for the
plain writes, new files) next to the last, as a program storing its results
does, and the file system does not see files replaced (which on ext4 starts
their writeback at once: ``auto_da_alloc``). The old arrays stay until the
end, so their dirty pages weigh on the later writes.

zarrs-python is optional (``pip install zarrs``); rows without it say so.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import zarr
import zarr.codecs
import zarrs_nvcomp
from bench_data import field_f32
from read_bench import interleaved_best_of, moto_server, zarrs_python_available
from zarrs_nvcomp._buffers import cupy_module

COLUMNS = 4096
NEW_ARRAYS = False  # --new-arrays


def array_paths(path: Path):
    """The path of each call's array: ``path`` every time, or with
    ``--new-arrays`` a new one per call."""
    calls = 0
    while True:
        yield path.with_name(f"{path.name}-{calls}") if NEW_ARRAYS else path
        calls += 1


def first_array_path(path: Path) -> Path:
    """The path of the first call's array of ``array_paths(path)``."""
    return next(array_paths(path))


def zarr_array(path: Path, data_shape, chunks, compressors, shards=None):
    """A new float32 zarr array at ``path`` (replacing one there), fill value 0."""
    return zarr.create_array(
        store=str(path),
        shape=data_shape,
        chunks=chunks,
        shards=shards,
        dtype="float32",
        compressors=compressors,
        fill_value=0,
        overwrite=True,
    )


def zarr_writer(
    path: Path, data_shape, chunks, shards, pipeline: str | None, to_host=None
):
    """A function that writes the data with zarr-python's pipeline, or
    zarrs-python's (``pipeline``), after ``to_host`` where given. The array
    is created on the first call (the untimed warm-up), so that the timed
    writes overwrite chunks, as ours do."""
    config = {"codec_pipeline.path": pipeline} if pipeline else {}
    made = []
    paths = array_paths(path)

    def write(data):
        with zarr.config.set(config):
            if not made or NEW_ARRAYS:
                made[:] = [
                    zarr_array(
                        next(paths),
                        data_shape,
                        chunks,
                        zarr.codecs.ZstdCodec(level=1),
                        shards,
                    )
                ]
            made[0][...] = data if to_host is None else to_host(data)

    return write


def zarr_gpu_writer(path: Path, data_shape, chunks):
    """A function that writes CuPy data with zarr-python's GPU buffers
    (``enable_gpu``), every chunk in one codec call, and the ``nvcomp_batch``
    zarr 3 codec (zstd) on the GPU; the array is created on the first call."""
    from zarrs_nvcomp.zarr3 import NvCompBatchZarrCodec

    made = []
    paths = array_paths(path)

    def write(data):
        with zarr.config.enable_gpu(), zarrs_nvcomp.set_zarr_batch_size(None):
            if not made or NEW_ARRAYS:
                codec = NvCompBatchZarrCodec(algorithm="zstd", device="cuda")
                made[:] = [zarr_array(next(paths), data_shape, chunks, codec)]
            made[0][...] = data
            cupy_module().cuda.get_current_stream().synchronize()

    return write


def ours(path: Path, data_shape, chunks, shards, device: str):
    """A function that writes the data with write_chunks_parallel; the array
    is created on the first call."""
    made = []
    paths = array_paths(path)

    def write(data):
        if not made or NEW_ARRAYS:
            made[:] = [
                zarrs_nvcomp.create_array(
                    str(next(paths)),
                    shape=data_shape,
                    dtype="float32",
                    chunks=chunks,
                    shards=shards,
                )
            ]
        zarrs_nvcomp.write_chunks_parallel(made[0], data, device=device)
        if device.startswith("cuda"):
            cupy_module().cuda.get_current_stream().synchronize()

    return write


def plain_file_writes(source: Path, target: Path, threads: int = 32):
    """A function that writes the chunk files ours stored at ``source`` (read
    on its first call, after ours' warm-up) as plain files under ``target``
    from a thread pool, each to a temporary name then renamed over the old
    one, as object_store does: what the file system gives for the same files
    without encoding."""
    files: list[tuple[Path, bytes]] = []
    targets = array_paths(target)

    def write(_data):
        if not files:
            source_now = first_array_path(source)
            chunks = (p for p in (source_now / "c").rglob("*") if p.is_file())
            files.extend((p.relative_to(source_now), p.read_bytes()) for p in chunks)
        root = next(targets)
        for folder in {rel.parent for rel, _ in files}:
            (root / folder).mkdir(parents=True, exist_ok=True)

        def put(file):
            rel, body = file
            staged = root / f"{rel}.staged"
            staged.write_bytes(body)
            staged.replace(root / rel)

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(put, files))

    return write


def table(title: str, nbytes: int, repeats: int, writers: dict, data) -> None:
    times = interleaved_best_of(
        repeats, {name: (lambda w=w: w(data)) for name, w in writers.items()}
    )
    print(f"\n{title}, best of {repeats}")
    first = next(iter(times))
    for name, t in times.items():
        ratio = f"{t / times[first]:.2f}x slower than {first}" if name != first else ""
        print(f"  {name:<34} {nbytes / t / 1e9:7.2f} GB/s  {ratio}")


def describe_file_system(path: Path) -> str:
    """The file system holding ``path`` (type and mount point, from
    /proc/mounts) and the kernel's dirty-page limits, which decide how fast
    writes without fsync return."""
    try:
        mounts = [
            line.split()[:3] for line in Path("/proc/mounts").read_text().splitlines()
        ]
        resolved = str(path.resolve())
        _, mount, kind = max(
            (m for m in mounts if resolved.startswith(m[1])), key=lambda m: len(m[1])
        )
        limits = {
            name: Path(f"/proc/sys/vm/{name}").read_text().strip()
            for name in ("dirty_ratio", "dirty_background_ratio", "dirty_bytes")
        }
    except (OSError, ValueError):
        return "file system: unknown"
    return f"file system: {kind} at {mount}; " + ", ".join(
        f"{k}={v}" for k, v in limits.items()
    )


def run_local(root: Path, size_mb: int, repeats: int) -> None:
    print(describe_file_system(root))
    data = field_f32(size_mb << 20)
    shape = data.shape
    chunk_rows, inner_rows, shard_rows = (
        (1 << 20) // (4 * COLUMNS),
        4,
        (16 << 20) // (4 * COLUMNS),
    )
    layouts = {
        "1 MiB chunks": ((chunk_rows, COLUMNS), None),
        "64 KiB inner chunks in 16 MiB shards": (
            (inner_rows, COLUMNS),
            (shard_rows, COLUMNS),
        ),
    }
    zarrs_pipeline = "zarrs.ZarrsCodecPipeline" if zarrs_python_available() else None
    if zarrs_pipeline is None:
        print("(zarrs-python not installed: pip install zarrs; its rows are left out)")
    cp = cupy_module()
    gpu_reason = zarrs_nvcomp.gpu_unavailable_reason(0)
    if cp is None or gpu_reason is not None:
        print(
            f"GPU cases skipped: {'CuPy is not installed' if cp is None else gpu_reason}"
        )
    for layout, (chunks, shards) in layouts.items():
        # Each layout in its own folder: the plain writes copy what ours
        # stored there, and nothing of the other layout.
        base = root / ("sharded" if shards else "chunked")
        base.mkdir()
        # zarrs-python reads the 64 KiB inner chunks as (4, 4096): same bytes.
        if cp is not None and gpu_reason is None:
            on_gpu = cp.asarray(data)
            writers = {
                "ours, GPU": ours(
                    base / "gpu-ours.zarr", shape, chunks, shards, "cuda"
                ),
                "plain file writes of ours' files": plain_file_writes(
                    base / "gpu-ours.zarr", base / "gpu-plain"
                ),
            }
            if zarrs_pipeline:
                writers["zarrs-python (incl. copy to host)"] = zarr_writer(
                    base / "gpu-zarrs.zarr",
                    shape,
                    chunks,
                    shards,
                    zarrs_pipeline,
                    cp.asnumpy,
                )
            if shards is None:
                writers["zarr-python (incl. copy to host)"] = zarr_writer(
                    base / "gpu-zarr.zarr", shape, chunks, shards, None, cp.asnumpy
                )
                writers["zarr-python GPU, nvcomp_batch codec"] = zarr_gpu_writer(
                    base / "gpu-zarr-nvcomp.zarr", shape, chunks
                )
            table(
                f"CuPy -> local disk, {layout}", data.nbytes, repeats, writers, on_gpu
            )
            del on_gpu
        writers = {
            "ours, CPU": ours(base / "cpu-ours.zarr", shape, chunks, shards, "cpu")
        }
        if zarrs_pipeline:
            writers["zarrs-python"] = zarr_writer(
                base / "cpu-zarrs.zarr", shape, chunks, shards, zarrs_pipeline
            )
        if shards is None:
            writers["zarr-python"] = zarr_writer(
                base / "cpu-zarr.zarr", shape, chunks, shards, None
            )
        table(f"NumPy -> local disk, {layout}", data.nbytes, repeats, writers, data)


def run_s3(root: Path, size_mb: int, repeats: int, threads: int) -> None:
    import boto3

    data = field_f32(min(size_mb, 256) << 20)
    chunks = ((1 << 20) // (4 * COLUMNS), COLUMNS)
    with moto_server() as endpoint:
        credentials = {
            "access_key_id": "x",
            "secret_access_key": "x",
            "region": "us-east-1",
        }
        options = {"endpoint": endpoint, "allow_http": "true", **credentials}
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            **{
                f"aws_{k}" if k != "region" else "region_name": v
                for k, v in credentials.items()
            },
        )
        client.create_bucket(Bucket="bench")
        url = "s3://bench/field.zarr"
        zarrs_nvcomp.create_array(
            url,
            shape=data.shape,
            dtype="float32",
            chunks=chunks,
            storage_options=options,
        )
        local = root / "s3-objects.zarr"
        ours(local, data.shape, chunks, None, "cpu")(data)
        local = first_array_path(local)
        objects = [
            (p.relative_to(local).as_posix(), p.read_bytes())
            for p in local.rglob("c/*/*")
        ]

        def put_all():
            with ThreadPoolExecutor(threads) as pool:
                list(
                    pool.map(
                        lambda o: client.put_object(
                            Bucket="bench", Key=f"puts/{o[0]}", Body=o[1]
                        ),
                        objects,
                    )
                )

        def ours_s3():
            zarrs_nvcomp.write_chunks_parallel(
                url, data, storage_options=options, device="cpu"
            )

        times = interleaved_best_of(
            repeats, {"ours (CPU encode + puts)": ours_s3, "boto3 PUTs only": put_all}
        )
        stored = sum(len(b) for _, b in objects)
        print(
            f"\nNumPy -> S3 (moto on loopback), {data.nbytes >> 20} MiB, 1 MiB chunks, best of {repeats}"
        )
        for name, t in times.items():
            print(
                f"  {name:<34} {data.nbytes / t / 1e9:7.2f} GB/s  ({stored / t / 1e9:.2f} GB/s stored)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=32, help="boto3 PUT threads")
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument(
        "--new-arrays", action="store_true", help="every write to a new array"
    )
    args = parser.parse_args()
    global NEW_ARRAYS
    NEW_ARRAYS = args.new_arrays
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zarrs-nvcomp-write-", dir=args.dir) as tmp:
        root = Path(tmp)
        run_local(root, args.size_mb, args.repeats)
        for path in root.iterdir():
            shutil.rmtree(path, ignore_errors=True)
        if not args.no_s3:
            run_s3(root, args.size_mb, args.repeats, args.threads)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
