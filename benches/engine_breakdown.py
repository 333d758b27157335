"""Where a device decode of many small buffers spends its time, next to nvidia.nvcomp.

    python benches/engine_breakdown.py                   # the H200 run (a few minutes)
    python benches/engine_breakdown.py --size-mb 64      # a quick look
    python benches/engine_breakdown.py --algorithms ans,zstd

For each algorithm, 1 GiB of field_f32 (``--size-mb``) in 64 KiB buffers
(16,384 of them; ``--chunk-kib``) encoded by this package into CuPy arrays
(on the device, as ``encode_batch`` returns them), then decoded, best of
``--repeats`` after a warm-up, in milliseconds per call:

- nvidia.nvcomp: its RAW codec decoding its own arrays (no wrapping timed),
  decoding one 64 KiB buffer (its fixed cost per call), and decoding the
  raw nvCOMP streams inside our buffers ("nv ours": our LZ4 buffers less
  their 4-byte header, our GDeflate buffers' pages, each copied to an
  allocation of its own), which tells a difference of the data (the streams
  its encoder writes) from one of the calls;
- ours, ``trusted_input=True`` and the default (untrusted) mode, split into
  the Python side and the engine's call: "inputs" (telling device from host
  and reading each array's pointer and size), "engine" (``device_batch``:
  framing, nvCOMP, results, waited for), "views" (``CudaArray`` views of the
  results), "list" (``decode_batch`` with ``device_outputs="views"``, the
  whole call), "packed" (``decode_packed`` of one buffer, the same items back
  to back, the whole call) and "one" (one 64 KiB buffer: the fixed cost);
- the engine's phases in the list and the packed form, from
  ``ZARRS_NVCOMP_PROFILE`` in a child process (each phase waits for the
  stream, so the sum is a little above "engine"):
  framing (device heads read and parsed), staging, size query, upload,
  decompress (nvCOMP's kernel, or the worker's round trip when untrusted),
  results (statuses and sizes back, checked), host check.

Without a usable GPU, CuPy or nvidia.nvcomp it says what is missing and
stops (exit 0).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
from bench_data import best_of, field_f32
from nvcomp_batch import NVCOMP_NAMES

#: The modes of our codec measured, by their trusted_input.
MODES = {"trusted": True, "default": False}
#: The forms of a batch profiled: a list of CuPy arrays, one packed buffer.
FORMS = ("list", "packed")
PROFILE_LINE = re.compile(r"zarrs_nvcomp profile \(ms since start\): (.*)")


def parse_profile(lines: list[str]) -> list[dict[str, float]]:
    """The phases of each profiled engine call, in milliseconds each (the
    engine prints the time from the call's start to each phase's end)."""
    calls = []
    for line in lines:
        match = PROFILE_LINE.search(line)
        if match is None:
            continue
        phases, last = {}, 0.0
        for mark in match.group(1).split(", "):
            name, _, ms = mark.rpartition(" ")
            phases[name] = phases.get(name, 0.0) + float(ms) - last
            last = float(ms)
        calls.append(phases)
    return calls


def fastest_call(calls: list[dict[str, float]]) -> dict[str, float]:
    """The call of least total time (the warm-up and slow outliers left out)."""
    return min(calls, key=lambda phases: sum(phases.values()))


def setup(algorithm: str, trusted: bool, size_mb: int, chunk: int):
    """CuPy, a codec of ours, the data split into ``chunk``-byte CuPy arrays,
    their encoding (a list of CuPy arrays) and the same packed."""
    import cupy as cp
    from zarrs_nvcomp import NvCompBatchCodec

    data = cp.asarray(field_f32(size_mb << 20).reshape(-1).view(np.uint8))
    items = [data[i : i + chunk] for i in range(0, data.nbytes, chunk)]
    codec = NvCompBatchCodec(
        algorithm, device="cuda", trusted_input=trusted, device_outputs="views"
    )
    # CuPy arrays, as a user's list would be (the views encode_batch returns
    # here are read back faster than CuPy arrays are).
    encoded = [cp.asarray(e) for e in codec.encode_batch(items)]
    packed = cp.concatenate(encoded)
    sizes = np.array([int(e.nbytes) for e in encoded], np.uint64)
    return cp, codec, data, items, encoded, packed, sizes


def child(args: argparse.Namespace) -> None:
    """Runs in a process with ZARRS_NVCOMP_PROFILE set: decodes one form
    ("list" or "packed") of one algorithm in one mode ``--repeats`` + 1
    times; the engine prints the phases of each call."""
    algorithm, mode, form = args.child
    _, codec, _, _, encoded, packed, sizes = setup(
        algorithm, MODES[mode], args.size_mb, args.chunk_kib << 10
    )
    for _ in range(args.repeats + 1):
        if form == "packed":
            codec.decode_packed(packed, sizes)
        else:
            codec.decode_batch(encoded)


def profiled(
    algorithm: str, mode: str, form: str, args: argparse.Namespace
) -> dict[str, float]:
    """The phases of our fastest call of ``form``, from a child process."""
    env = dict(os.environ, ZARRS_NVCOMP_PROFILE="1")
    command = [
        sys.executable,
        __file__,
        "--child",
        algorithm,
        mode,
        form,
        f"--size-mb={args.size_mb}",
        f"--chunk-kib={args.chunk_kib}",
        f"--repeats={args.repeats}",
    ]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    what = f"{algorithm} {mode} {form}"
    calls = parse_profile(proc.stderr.splitlines())
    if proc.returncode != 0 or not calls:
        print(f"  (profile of {what} failed: {proc.stderr.strip()[-500:]})")
        return {}
    failures = [line for line in proc.stderr.splitlines() if "decode failed" in line]
    if failures:
        # An ANS pass that fails is decoded again with nvCOMP's size query.
        print(f"  ({what}: {len(failures)} passes failed: {failures[0]})")
    # Only decode calls print phases (encode has none); a failed first pass
    # and its retry print a line each, so when every first pass failed (said
    # above) the fastest line is a retry's.
    return fastest_call([c for c in calls if "decompress" in c] or calls)


def ours(algorithm: str, mode: str, args: argparse.Namespace) -> dict[str, float]:
    """Milliseconds of each part of our call, best of ``args.repeats``."""
    from zarrs_nvcomp import _buffers

    cp, codec, _, items, encoded, packed, sizes = setup(
        algorithm, MODES[mode], args.size_mb, args.chunk_kib << 10
    )
    sync = cp.cuda.runtime.deviceSynchronize
    engine = codec._engine

    def best(fn: Callable[[], object]) -> float:
        return best_of(fn, args.repeats, sync) * 1e3

    def inputs():
        _buffers.classify(encoded, "inputs")
        return _buffers.device_regions(encoded, "input")[0]

    regions = inputs()
    batch = engine.device_batch(regions, False)
    times = {
        "inputs": best(inputs),
        "engine": best(lambda: engine.device_batch(regions, False)),
        "views": best(batch.arrays),
        "list": best(lambda: codec.decode_batch(encoded)),
        "packed": best(lambda: codec.decode_packed(packed, sizes)),
        "one": best(lambda: codec.decode_batch(encoded[:1])),
    }
    decoded = cp.concatenate([cp.asarray(d) for d in codec.decode_batch(encoded)])
    expected = cp.concatenate([cp.asarray(i) for i in items])
    assert bool((decoded == expected).all()), (
        f"{algorithm} {mode}: decoded data differs"
    )
    return times


def raw_streams(algorithm: str, encoded: list) -> list:
    """The raw nvCOMP streams inside our encoded CuPy buffers, each copied
    to an allocation of its own (nvidia.nvcomp wants them aligned): LZ4
    buffers less their 4-byte size header, GDeflate buffers split into their
    pages (u64 decoded size, u64 page count, u64 size per page, pages)."""
    import cupy as cp

    streams = []
    for buf in encoded:
        buf = cp.asarray(buf)
        if algorithm == "lz4":
            streams.append(cp.ascontiguousarray(buf[4:]))
        elif algorithm == "gdeflate":
            head = cp.asnumpy(buf[:16]).view("<u8")
            pages = int(head[1])
            sizes = cp.asnumpy(buf[16 : 16 + 8 * pages]).view("<u8").tolist()
            at = 16 + 8 * pages
            for size in sizes:
                streams.append(cp.ascontiguousarray(buf[at : at + size]))
                at += size
        else:
            streams.append(cp.ascontiguousarray(buf))
    return streams


def nvcomp_times(algorithm: str, args: argparse.Namespace) -> dict[str, float]:
    """Milliseconds of nvidia.nvcomp's decode of its own arrays (all of them,
    and one), and of the raw streams inside ours."""
    import cupy as cp
    import nvidia.nvcomp as nvc
    from nvcomp_batch import as_batch

    *_, items, ours_encoded, _, _ = setup(
        algorithm, True, args.size_mb, args.chunk_kib << 10
    )
    codec = nvc.Codec(
        algorithm=NVCOMP_NAMES[algorithm], bitstream_kind=nvc.BitstreamKind.RAW
    )
    encoded = codec.encode(as_batch(nvc, items))
    one = codec.encode(as_batch(nvc, items[:1]))
    theirs_of_ours = as_batch(nvc, raw_streams(algorithm, ours_encoded))
    sync = cp.cuda.runtime.deviceSynchronize
    return {
        "all": best_of(lambda: codec.decode(encoded), args.repeats, sync) * 1e3,
        "one": best_of(lambda: codec.decode(one), args.repeats, sync) * 1e3,
        "ours": best_of(lambda: codec.decode(theirs_of_ours), args.repeats, sync) * 1e3,
    }


def unavailable() -> str | None:
    """Why the GPU parts cannot run here, or None."""
    import zarrs_nvcomp

    reason = zarrs_nvcomp.gpu_unavailable_reason()
    if reason is not None:
        return f"no usable GPU: {reason}"
    for module in ("cupy", "nvidia.nvcomp"):
        try:
            __import__(module)
        except Exception as e:  # noqa: BLE001  # ImportError, or a CUDA library that will not load
            return f"{module} unavailable: {type(e).__name__}: {e}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="data size, MiB")
    parser.add_argument("--chunk-kib", type=int, default=64, help="buffer size, KiB")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--algorithms", default=",".join(NVCOMP_NAMES))
    parser.add_argument(
        "--child",
        nargs=3,
        metavar=("ALGORITHM", "MODE", "FORM"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    reason = unavailable()
    if reason is not None:
        print(f"skipping: {reason}")
        return
    count = (args.size_mb << 20) // (args.chunk_kib << 10)
    print(
        f"device decode of {args.size_mb} MiB of field_f32 in {count} buffers of "
        f"{args.chunk_kib} KiB, best of {args.repeats}, milliseconds per call"
    )
    parts = ["inputs", "engine", "views", "list", "packed", "one"]
    phase_names: list[str] = []
    results, profiles = [], []
    for algorithm in args.algorithms.split(","):
        theirs = nvcomp_times(algorithm, args)
        for mode in MODES:
            t0 = time.perf_counter()
            results.append((algorithm, mode, theirs, ours(algorithm, mode, args)))
            for form in FORMS:
                phases = profiled(algorithm, mode, form, args)
                phase_names += [p for p in phases if p not in phase_names]
                profiles.append((algorithm, mode, form, phases))
            print(f"  {algorithm} {mode}: measured in {time.perf_counter() - t0:.0f} s")
    print()
    print(
        f"{'algorithm':<9} {'mode':<8} {'nvcomp':>7} {'nv one':>7} {'nv ours':>7} ",
        end="",
    )
    print(" ".join(f"{p:>7}" for p in parts), end="")
    print(f" {'list/nv':>7} {'pack/nv':>7}")
    for algorithm, mode, theirs, mine in results:
        print(
            f"{algorithm:<9} {mode:<8} {theirs['all']:7.2f} {theirs['one']:7.3f} "
            f"{theirs['ours']:7.2f} ",
            end="",
        )
        print(" ".join(f"{mine[p]:7.2f}" for p in parts), end="")
        list_ratio, packed_ratio = (
            theirs["all"] / mine["list"],
            theirs["all"] / mine["packed"],
        )
        print(f" {list_ratio:7.2f} {packed_ratio:7.2f}")
    print()
    print("engine phases (ms, ZARRS_NVCOMP_PROFILE, fastest call):")
    header = " ".join(f"{p:>12}" for p in phase_names)
    print(f"{'algorithm':<9} {'mode':<8} {'form':<7} {header}")
    for algorithm, mode, form, phases in profiles:
        cells = [
            f"{phases[p]:12.2f}" if p in phases else f"{'-':>12}" for p in phase_names
        ]
        print(f"{algorithm:<9} {mode:<8} {form:<7} " + " ".join(cells))
    print(
        "\nlist/nv and pack/nv: nvidia.nvcomp's time over ours (the ratios of the bar: "
        "list >= 1.0, packed >= 1.2)."
    )


if __name__ == "__main__":
    main()
