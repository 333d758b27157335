"""Diagnoses how the GPU path behaves on a corrupt Zstandard chunk (issue 14,
item 1): each probe runs in a child process with a time limit, and while it
runs the parent samples the GPU's utilisation and the child's threads' states.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROBES = {
    "reader": """
import zarrs_nvcomp, numpy as np
out = zarrs_nvcomp.read_chunks_parallel(PATH, device="cuda")
print("reader returned", type(out))
""",
    "codec": """
import zarrs_nvcomp, numpy as np
codec = zarrs_nvcomp.NvCompBatchCodec("zstd", device="cuda")
out = codec.decode_batch([np.frombuffer(open(CHUNK, "rb").read(), np.uint8)])
print("codec returned", len(out[0]))
""",
    "nvidia.nvcomp": """
import cupy as cp, numpy as np
from nvidia import nvcomp
data = np.frombuffer(open(CHUNK, "rb").read(), np.uint8)
codec = nvcomp.Codec(algorithm="Zstd", bitstream_kind=nvcomp.BitstreamKind.RAW)
arr = nvcomp.as_array(cp.asarray(data))
out = codec.decode(arr)
cp.cuda.runtime.deviceSynchronize()
print("nvidia.nvcomp returned", out.buffer_size)
""",
}


def corrupt(raw: bytes) -> bytes:
    b = bytearray(raw)
    start = len(b) // 3
    for i in range(start, len(b), 7):
        b[i] ^= 0x5A
    return bytes(b)


def sample(pid: int) -> str:
    states = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                wchan = f.read()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            states.append(f"{comm}:{fields[0]}:{wchan}")
    except OSError:
        pass
    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"gpu {gpu}; threads " + " ".join(sorted(set(states)))


def main() -> None:
    import zarr
    from zarr.codecs import ZstdCodec

    limit = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "a.zarr")
    data = np.cumsum(np.random.default_rng(0).normal(size=(512, 512)), axis=1).astype(
        "f4"
    )
    arr = zarr.create_array(
        path,
        shape=data.shape,
        chunks=(256, 256),
        dtype="f4",
        compressors=ZstdCodec(level=3),
    )
    arr[:] = data
    key = os.path.join(path, "c", "1", "1")
    bad = corrupt(Path(key).read_bytes())
    Path(key).write_bytes(bad)
    chunk = os.path.join(tmp, "chunk.zst")
    Path(chunk).write_bytes(bad)
    results = {}
    for name, body in PROBES.items():
        code = f"PATH={path!r}\nCHUNK={chunk!r}\n" + body
        env = dict(os.environ, ZARRS_NVCOMP_PROFILE="1")
        t0 = time.time()
        child = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        samples = []
        while child.poll() is None and time.time() - t0 < limit:
            time.sleep(2)
            if child.poll() is None:
                samples.append(f"{time.time() - t0:.0f}s {sample(child.pid)}")
        hung = child.poll() is None
        if hung:
            child.kill()
        out = child.communicate()[0]
        results[name] = {
            "hung": hung,
            "seconds": round(time.time() - t0, 2),
            "rc": child.returncode,
            "output": out[-3000:],
            "samples": samples[:3] + samples[-2:],
        }
        print(
            f"== {name}: hung={hung} after {results[name]['seconds']} s rc={child.returncode}"
        )
        print(out[-3000:])
        for s in results[name]["samples"]:
            print("   ", s)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_hang_diag.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
