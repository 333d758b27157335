"""Ctrl-C during a long batch call of the codec raises KeyboardInterrupt
within about a second, and the codec stays usable."""

from __future__ import annotations

import pytest
from conftest import interrupt, interruptible_python

#: Times a short batch, sizes a batch of about ten times a 0.5 s budget
#: (at most 1 GiB of output), prints "ready", runs it (argv[1]: "decode" or
#: "encode") and prints when KeyboardInterrupt arrived, then checks that the
#: codec still round-trips.
CHILD = """
import sys, time
import numpy as np
from zarrs_nvcomp import NvCompBatchCodec

what = sys.argv[1]
codec = NvCompBatchCodec("gzip", {"algorithm": 5}, device="cpu")
rng = np.random.default_rng(0)
item = np.cumsum(rng.standard_normal(1 << 20)).round(2).astype(np.float32)  # 4 MiB
encoded = codec.encode(item)
call = codec.decode_batch if what == "decode" else codec.encode_batch
one = encoded if what == "decode" else item
start = time.perf_counter()
call([one] * 4)
per_item = (time.perf_counter() - start) / 4
# The same buffer many times: read-only inputs may alias; outputs are new.
count = int(min(5.0 / per_item, (1 << 30) / item.nbytes)) + 1
print("ready", count, per_item, flush=True)
try:
    call([one] * count)
    print("returned", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
back = codec.decode_batch(codec.encode_batch([item[:1000]]))[0]
assert np.array_equal(back.view(np.float32), item[:1000])
print("usable", flush=True)
"""


@pytest.mark.parametrize("what", ["decode", "encode"])
def test_ctrl_c_interrupts_a_long_cpu_batch(what):
    child = interruptible_python(CHILD, what)
    ready = child.stdout.readline().split()
    assert ready and ready[0] == "ready", ready
    count, per_item = int(ready[1]), float(ready[2])
    out, sent = interrupt(child, 60, "the batch")
    lines = out.split("\n")
    word, _, at = lines[0].partition(" ")
    assert word == "interrupted", out
    took = float(at) - sent
    # Well before the batch would have ended (about 5 s in), within about a second.
    assert took < min(1.5, 0.5 * count * per_item), (took, count, per_item)
    assert "usable" in lines[1:], out
    assert child.returncode == 0
