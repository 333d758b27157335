"""The Python boundary's cost per buffer, and the packed form, next to nvidia.nvcomp.

    python benches/python_boundary.py                 # the H200 run (about 1-2 minutes)
    python benches/python_boundary.py --size-mb 64    # CPU-only run: the boundary parts

Parts that need no GPU (timed everywhere, per buffer, for --items buffers of
64 KiB at made-up addresses, never dereferenced):
- "device pointers": reading pointer and size of objects that expose
  ``__cuda_array_interface__`` (dicts made ahead, so only our side is timed),
  as the codec does for every device input;
- with CuPy importable (it makes arrays without a GPU): the input side of a
  list of CuPy arrays (telling device from host, reading pointers and sizes)
  and of the CudaArray views the codec returns with
  ``device_outputs="views"``; the output side: CuPy arrays over one
  allocation (``device_outputs="cupy"``, the default) against CudaArray views
  (``zarrs_nvcomp.device_views``, the code that makes the codec's views);
- "host list" / "host packed": decode_batch of tiny host buffers against
  decode_packed of the same buffers in one buffer, on the CPU backend: the
  per-buffer cost of lists of Python objects in and out.

On a GPU (CuPy and nvidia.nvcomp installed): 1 GiB of field_f32 in 64 KiB and
1 MiB chunks, LZ4, Zstd, GDeflate, Snappy, ANS; decode of a list of CuPy
arrays (CuPy arrays out, and CudaArray views out), of one packed CuPy buffer,
and nvidia.nvcomp decoding its own arrays
(built before timing: no wrapping timed), same run; GB/s and the ratios.
nvidia.nvcomp runs twice: RAW (one nvCOMP chunk per array, the chunk size
ours decodes: the ratios) and its default managed format (every array cut
into 64 KiB chunks of its own, so a 1 MiB array is 16 chunks to the GPU).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import zarrs_nvcomp
from bench_data import best_of, field_f32
from nvcomp_batch import NVCOMP_NAMES, as_batch
from zarrs_nvcomp import NvCompBatchCodec, _buffers
from zarrs_nvcomp._zarrs_nvcomp import read_device_regions

CHUNK_SIZES = {"64KiB": 64 << 10, "1MiB": 1 << 20}
#: The made-up device address of the boundary parts' buffers.
FAKE_BASE = 0x7F0000000000
ITEM = 64 << 10
NVCOMP_RAW = "nvidia.nvcomp raw"
NVCOMP_MANAGED = "nvidia.nvcomp managed"


class FakeDeviceArray:
    """A device array as the boundary sees it: ``__cuda_array_interface__``
    made ahead, so that only the reading is timed. Never dereferenced."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "strides": None,
            "version": 3,
            "stream": None,
        }


class FakeDeviceBatch:
    """A ``DeviceBatch`` as ``_buffers.device_outputs`` reads it when it makes
    CuPy arrays: buffers back to back at a made-up address."""

    def __init__(self, items: int, gap: int = 0) -> None:
        self.ptr, self.device = FAKE_BASE, 0
        self._step = ITEM + gap
        self.nbytes = items * self._step
        self.is_packed = gap == 0
        self._items = items

    def ranges_buffer(self) -> bytes:
        # Made at each read, as DeviceBatch.ranges_buffer is.
        starts = np.arange(self._items, dtype=np.uint64) * np.uint64(self._step)
        return np.stack([starts, starts + np.uint64(ITEM)], axis=1).tobytes()


def per_item(label: str, seconds: float, items: int) -> None:
    print(f"{label}: {seconds / items * 1e6:.3f} us/item")


def host_time(fn: Callable[[], object], repeats: int) -> float:
    """The best CPU time of this process over ``repeats`` calls of ``fn``
    (host-only work: what the other processes of a loaded machine take is
    not counted)."""
    return best_of(fn, repeats, clock=time.process_time)


def cupy_boundary(items: int, repeats: int) -> None:
    """Both sides of a list call of CuPy arrays and of CudaArray views, less
    the engine and the stream wait (which need a GPU)."""
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001  # ImportError, or a CUDA library that will not load
        print(f"skipping the CuPy parts: {type(e).__name__}: {e}")
        return
    memory = cp.cuda.UnownedMemory(FAKE_BASE, items * ITEM, None, 0)
    arrays = [
        cp.ndarray((ITEM,), cp.uint8, cp.cuda.MemoryPointer(memory, i * ITEM))
        for i in range(items)
    ]
    whole = FakeDeviceArray(FAKE_BASE, items * ITEM)
    sizes = np.full(items, ITEM, np.uint64)
    views = zarrs_nvcomp.device_views(whole, sizes, device=0)

    def inputs(objs: list) -> None:
        # What decode_batch does per item before the engine: tell device from
        # host, then read pointers and sizes (device_regions less its wait).
        _buffers.classify(objs, "inputs")
        read_device_regions(objs, "input", cp.ndarray)

    per_item(
        f"inputs, {items} CuPy arrays",
        host_time(lambda: inputs(arrays), repeats),
        items,
    )
    per_item(
        f"inputs, {items} CudaArray views",
        host_time(lambda: inputs(views), repeats),
        items,
    )
    batch = FakeDeviceBatch(items)
    t = host_time(lambda: _buffers.device_outputs(batch), repeats)
    per_item(f"outputs, {items} CuPy arrays (device_outputs='cupy')", t, items)
    gapped = FakeDeviceBatch(items, gap=8)
    t = host_time(lambda: _buffers.device_outputs(gapped), repeats)
    per_item("  with alignment gaps between the buffers (encode's outputs)", t, items)
    t = host_time(lambda: zarrs_nvcomp.device_views(whole, sizes, device=0), repeats)
    per_item(f"outputs, {items} CudaArray views (device_outputs='views')", t, items)


def boundary(items: int, repeats: int) -> None:
    """The parts that need no GPU."""
    fakes = [FakeDeviceArray(FAKE_BASE + i * ITEM, ITEM) for i in range(items)]
    t = host_time(lambda: _buffers.device_regions(fakes, "input"), repeats)
    per_item(f"device pointers, {items} __cuda_array_interface__ objects", t, items)
    cupy_boundary(items, repeats)

    codec = NvCompBatchCodec("lz4", device="cpu")
    tiny = [np.full(16, i % 251, np.uint8) for i in range(items)]
    encoded = codec.encode_batch(tiny)
    packed = np.frombuffer(b"".join(encoded), np.uint8)
    sizes = np.array([len(e) for e in encoded], np.uint64)
    t_list = best_of(lambda: codec.decode_batch(encoded), repeats)
    t_packed = best_of(lambda: codec.decode_packed(packed, sizes), repeats)
    print(
        f"host list decode of {items} 16-byte buffers: {t_list / items * 1e6:.3f} us/item; "
        f"packed: {t_packed / items * 1e6:.3f} us/item ({t_list / t_packed:.1f}x less per item)"
    )


def gpu_parts(size_mb: int, repeats: int, algorithms: list[str]) -> None:
    import cupy as cp

    try:
        import nvidia.nvcomp as nvc
    except Exception as e:  # noqa: BLE001  # ImportError, or a CUDA library that will not load
        nvc = None
        print(f"nvidia.nvcomp unavailable: {type(e).__name__}: {e}")
    data = field_f32(size_mb << 20).reshape(-1).view(np.uint8)
    total = data.nbytes
    sync = cp.cuda.runtime.deviceSynchronize
    rows = []
    for algorithm in algorithms:
        codec = NvCompBatchCodec(algorithm, device="cuda", trusted_input=True)
        views_codec = NvCompBatchCodec(
            algorithm, device="cuda", trusted_input=True, device_outputs="views"
        )
        for chunk_name, chunk in CHUNK_SIZES.items():
            device_data = cp.asarray(data)
            items = [device_data[i : i + chunk] for i in range(0, total, chunk)]
            encoded = codec.encode_batch(items)
            sizes = np.array([int(e.nbytes) for e in encoded], np.uint64)
            packed = cp.concatenate(encoded)
            label = f"{algorithm} {chunk_name} x{len(items)}"

            def rate(seconds: float) -> float:
                return total / seconds / 1e9

            t = best_of(lambda c=codec, x=encoded: c.decode_batch(x), repeats, sync)
            rows.append((label, "list of CuPy arrays", rate(t)))
            t = best_of(
                lambda c=views_codec, x=encoded: c.decode_batch(x), repeats, sync
            )
            rows.append((label, "list, views out", rate(t)))
            t = best_of(
                lambda c=codec, x=packed, s=sizes: c.decode_packed(x, s), repeats, sync
            )
            rows.append((label, "packed CuPy buffer", rate(t)))
            if nvc is not None:
                # nvidia.nvcomp encodes its own arrays (no wrapping timed), in
                # two formats: RAW, one nvCOMP chunk per array as ours (the
                # same chunk size decoded, the comparison the ratios make),
                # and its default managed format, which cuts every array into
                # 64 KiB chunks of its own (a finer batch than the data's
                # chunks; shown for reference).
                for kind, decoder in (
                    (nvc.BitstreamKind.RAW, NVCOMP_RAW),
                    (None, NVCOMP_MANAGED),
                ):
                    options = {} if kind is None else {"bitstream_kind": kind}
                    nv_codec = nvc.Codec(algorithm=NVCOMP_NAMES[algorithm], **options)
                    nv_encoded = nv_codec.encode(as_batch(nvc, items))
                    t = best_of(
                        lambda c=nv_codec, x=nv_encoded: c.decode(x), repeats, sync
                    )
                    rows.append((label, decoder, rate(t)))
                    del nv_encoded
            del device_data, items, encoded, packed
    print(f"\n{'data':<24} {'decoder':<22} {'GB/s':>8}")
    for label, decoder, gbps in rows:
        print(f"{label:<24} {decoder:<22} {gbps:8.2f}")
    by = {(label, decoder): gbps for label, decoder, gbps in rows}
    print()
    for label in dict.fromkeys(r[0] for r in rows):
        theirs = by.get((label, NVCOMP_RAW))
        if theirs:
            ours_list = by[(label, "list of CuPy arrays")]
            ours_views = by[(label, "list, views out")]
            ours_packed = by[(label, "packed CuPy buffer")]
            managed = by[(label, NVCOMP_MANAGED)]
            print(
                f"{label}: list / nvidia.nvcomp raw = {ours_list / theirs:.2f}, "
                f"list with views / raw = {ours_views / theirs:.2f}, "
                f"packed / nvidia.nvcomp raw = {ours_packed / theirs:.2f} "
                f"(list / managed = {ours_list / managed:.2f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="GPU data size, MiB")
    parser.add_argument(
        "--items", type=int, default=16384, help="buffers per boundary call"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--algorithms", default=",".join(NVCOMP_NAMES))
    args = parser.parse_args()
    boundary(args.items, args.repeats)
    reason = zarrs_nvcomp.gpu_unavailable_reason()
    if reason is not None:
        print(f"skipping the GPU parts: {reason}")
        return
    gpu_parts(args.size_mb, args.repeats, args.algorithms.split(","))


if __name__ == "__main__":
    main()
