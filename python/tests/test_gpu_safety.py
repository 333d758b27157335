"""Corrupt data on the GPU is never less safe than on the CPU: the GPU path
reports what the CPU path reports, never hangs, and leaves the process's CUDA
context usable (decoding runs in a worker process; see the README's "Corrupt
input"). The corpus holds cases found by ``fuzz/gpu_fuzz.py`` on the H200."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numcodecs
import numpy as np
import pytest
from conftest import create_like, cupy_or_skip
from zarr.codecs import ZstdCodec

import zarrs_nvcomp
from zarrs_nvcomp import DecodeError, NvCompBatchCodec

pytestmark = pytest.mark.gpu

CORPUS = Path(__file__).resolve().parents[2] / "fuzz" / "gpu_corpus"


def field(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.standard_normal(shape), axis=-1).round(2).astype(np.float32)


def field_array(path: Path, **create) -> np.ndarray:
    """A 512x512 float32 field written in 256x256 chunks to a new array at
    ``path`` created with ``create`` (its codecs); returns the field."""
    data = field((512, 512))
    create_like(path, data, chunks=(256, 256), **create)[:] = data
    return data


def corrupt_like_the_report(raw: bytes) -> bytes:
    """Every 7th byte of the last two thirds XORed with 0x5A (issue 14, case 1)."""
    b = bytearray(raw)
    for i in range(len(b) // 3, len(b), 7):
        b[i] ^= 0x5A
    return bytes(b)


def run_isolated(
    code: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (environment `env`, else this
    one's), so that a hang fails the test instead of stalling the suite."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


@pytest.mark.parametrize("checksum", [False, True])
def test_corrupt_zstd_chunk_is_reported_on_the_gpu(tmp_path, checksum):
    path = tmp_path / "a.zarr"
    field_array(path, compressors=ZstdCodec(level=3, checksum=checksum))
    key = path / "c" / "1" / "1"
    key.write_bytes(corrupt_like_the_report(key.read_bytes()))
    with pytest.raises(DecodeError, match="c/1/1") as cpu_error:
        zarrs_nvcomp.read_chunks_parallel(str(path), device="cpu")
    proc = run_isolated(
        f"""
        import zarrs_nvcomp, numpy as np
        try:
            zarrs_nvcomp.read_chunks_parallel({str(path)!r}, device="cuda")
            print("NO ERROR")
        except zarrs_nvcomp.DecodeError as e:
            print("DecodeError:", e)
        # The process's context still works afterwards.
        ok = zarrs_nvcomp.read_chunks_parallel({str(path)!r}, np.s_[:256, :256], device="cuda")
        print("still usable:", float(ok.sum()))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "DecodeError:" in proc.stdout and "c/1/1" in proc.stdout, proc.stdout
    assert "still usable" in proc.stdout
    assert "NO ERROR" not in proc.stdout
    assert str(cpu_error.value)


def test_trusted_input_decodes_in_process_and_matches():
    codec = NvCompBatchCodec("zstd", device="cuda", trusted_input=True)
    chunks = [field(5000, seed=i) for i in range(4)]
    encoded = NvCompBatchCodec("zstd", device="cpu").encode_batch(chunks)
    for d, c in zip(codec.decode_batch(encoded), chunks, strict=True):
        np.testing.assert_array_equal(np.frombuffer(d, np.float32), c)


def test_the_worker_follows_scratch_memory_the_engine_replaced():
    # The worker keeps the engine's scratch memory open between requests.
    # Trusted decodes grow that memory without the worker, freeing what it
    # holds; the driver may place the next allocation there, and the worker
    # must close what a request does not name before opening anything, or
    # cuIpcOpenMemHandle fails with CUDA_ERROR_ALREADY_MAPPED (GPU fuzz, 2 of
    # 4,515 cases). A fresh interpreter, so that the scratch starts empty.
    proc = run_isolated(
        """
        import numpy as np, zarrs_nvcomp
        cpu = zarrs_nvcomp.NvCompBatchCodec("lz4", device="cpu")
        untrusted = zarrs_nvcomp.NvCompBatchCodec("lz4", device="cuda")
        trusted = zarrs_nvcomp.NvCompBatchCodec("lz4", device="cuda", trusted_input=True)
        rng = np.random.default_rng(29)
        for mib in (1, 2, 4, 8, 16):
            # Incompressible bytes: input and output scratch grow alike.
            for codec, size in ((untrusted, mib), (trusted, 2 * mib), (untrusted, 3 * mib)):
                plain = [rng.bytes(size << 19) for _ in range(2)]
                decoded = codec.decode_batch(cpu.encode_batch(plain))
                assert [bytes(memoryview(d)) for d in decoded] == plain, (mib, size)
        print("all decoded")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "all decoded" in proc.stdout


# Raw deflate streams are walked whole before nvCOMP sees them too: its
# decoder accepts distances reaching before the output's start and undefined
# codes.
@pytest.mark.parametrize("algorithm", ["zstd", "gzip", "deflate", "gdeflate", "snappy", "lz4"])
def test_corrupt_buffer_error_names_the_buffer(algorithm):
    cpu = NvCompBatchCodec(algorithm, device="cpu")
    gpu = NvCompBatchCodec(algorithm, device="cuda")
    good = [bytes(memoryview(e)) for e in cpu.encode_batch([field(20000, s) for s in range(3)])]
    bad = corrupt_like_the_report(good[1])
    with pytest.raises(DecodeError) as cpu_error:
        cpu.decode_batch([good[0], bad, good[2]])
    assert "buffer 1" in str(cpu_error.value)
    with pytest.raises(DecodeError, match="buffer 1"):
        gpu.decode_batch([good[0], bad, good[2]])
    for d, g in zip(gpu.decode_batch(good), cpu.decode_batch(good), strict=True):
        assert bytes(memoryview(d)) == bytes(memoryview(g))


def corpus_cases():
    if not CORPUS.is_dir():
        return []
    return sorted(CORPUS.glob("*.json"))


@pytest.mark.parametrize("case_file", corpus_cases(), ids=lambda p: p.stem)
def test_fuzz_corpus_case(case_file, monkeypatch, request):
    """Replays a case the fuzz harness found: the GPU raises where the CPU
    raises, returns the CPU's bytes where the CPU decodes, and the context
    stays usable, except where the case says the GPU path is stricter.
    Cases of a gap that is not closed are strict xfails: they fail the
    suite the day they pass."""
    monkeypatch.setenv("ZARRS_NVCOMP_GPU_TIMEOUT", "10")
    case = json.loads(case_file.read_text())
    if "known_gap" in case:
        request.applymarker(pytest.mark.xfail(strict=True, reason=case["known_gap"]))
    batch = [base64.b64decode(b) for b in case["batch"]]
    gpu = NvCompBatchCodec(case["algorithm"], device="cuda")
    try:
        gpu_out = [bytes(memoryview(d)) for d in gpu.decode_batch(batch)]
    except DecodeError as e:
        gpu_out = e
    if case["algorithm"] in zarrs_nvcomp.CPU_ALGORITHMS:
        cpu = NvCompBatchCodec(case["algorithm"], device="cpu")
        try:
            cpu_out = [bytes(memoryview(d)) for d in cpu.decode_batch(batch)]
        except DecodeError as e:
            cpu_out = e
        if isinstance(cpu_out, Exception):
            assert isinstance(gpu_out, Exception), f"GPU accepted what the CPU rejects: {cpu_out}"
        elif "gpu_stricter" in case:
            # A stream RFC 8878 calls corrupt that the CPU library decodes
            # anyway: the GPU path refuses it rather than return other bytes.
            assert isinstance(gpu_out, Exception), "GPU decoded a stream its host checks refuse"
        else:
            assert gpu_out == cpu_out
    trusted = NvCompBatchCodec(case["algorithm"], device="cuda", trusted_input=True)
    valid = [base64.b64decode(b) for b in case["valid"]]
    assert len(trusted.decode_batch(valid)) == len(valid)


def flip_last_byte(key: Path) -> None:
    raw = bytearray(key.read_bytes())
    raw[-1] ^= 0x01
    key.write_bytes(bytes(raw))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_wrong_zstd_content_checksum_is_an_error_on_both_paths(tmp_path, device):
    # Only the stored checksum differs: the stream itself decodes cleanly,
    # and nvCOMP does not read checksums, so the engine checks them.
    path = tmp_path / "a.zarr"
    data = field_array(path, compressors=ZstdCodec(level=3, checksum=True))
    flip_last_byte(path / "c" / "0" / "1")
    with pytest.raises(DecodeError, match="c/0/1"):
        zarrs_nvcomp.read_chunks_parallel(str(path), device=device)
    np.testing.assert_array_equal(
        zarrs_nvcomp.read_chunks_parallel(str(path), np.s_[:256, :256], device="cpu"),
        data[:256, :256],
    )


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_wrong_zlib_adler32_is_an_error_on_both_paths(tmp_path, device):
    path = tmp_path / "a.zarr"
    field_array(path, zarr_format=2, compressors=numcodecs.Zlib(level=1))
    flip_last_byte(path / "1.0")
    with pytest.raises(DecodeError, match=r"\b1\.0\b"):
        zarrs_nvcomp.read_chunks_parallel(str(path), device=device)


def device_checked_cases():
    """Corpus cases the host checks untrusted streams from device memory
    too: raw DEFLATE, and Zstandard (Huffman trees of literals; cases that
    fail the worker are blamed from a copy), known gaps left out."""
    return [
        p
        for p in corpus_cases()
        if p.name.startswith(("deflate-", "zstd-")) and "known_gap" not in json.loads(p.read_text())
    ]


def on_device(cp, encoded: list[str]) -> list:
    return [cp.asarray(np.frombuffer(base64.b64decode(b), np.uint8)) for b in encoded]


@pytest.mark.parametrize("case_file", device_checked_cases(), ids=lambda p: p.stem)
def test_streams_in_device_memory_are_checked_too(case_file, monkeypatch):
    # The host's checks read device inputs through one batched copy.
    monkeypatch.setenv("ZARRS_NVCOMP_GPU_TIMEOUT", "10")
    cp = cupy_or_skip()
    case = json.loads(case_file.read_text())
    algorithm = case["algorithm"]
    cpu = NvCompBatchCodec(algorithm, device="cpu")
    host_batch = [base64.b64decode(b) for b in case["batch"]]
    if "gpu_stricter" in case:
        # The CPU library decodes it; the GPU path refuses it all the same.
        assert len(cpu.decode_batch(host_batch)) == len(host_batch)
    else:
        with pytest.raises(DecodeError, match="buffer 1"):
            cpu.decode_batch(host_batch)
    with pytest.raises(DecodeError, match="buffer 1"):
        NvCompBatchCodec(algorithm, device="cuda").decode_batch(on_device(cp, case["batch"]))
    decoded = NvCompBatchCodec(algorithm, device="cuda").decode_batch(on_device(cp, case["valid"]))
    expected = cpu.decode_batch([base64.b64decode(b) for b in case["valid"]])
    for d, e in zip(decoded, expected, strict=True):
        assert cp.asnumpy(d).tobytes() == bytes(memoryview(e))


@pytest.mark.parametrize("algorithm", ["zstd", "deflate"])
def test_trusted_device_inputs_skip_the_host_check(algorithm):
    # The profile line names the host check where it runs: untrusted device
    # inputs are copied and checked, trusted ones are not.
    cupy_or_skip()
    proc = run_isolated(
        f"""
        import sys
        import cupy as cp, numpy as np
        from zarrs_nvcomp import NvCompBatchCodec
        data = [np.arange(i * 1000, (i + 2) * 1000, dtype=np.float32) for i in range(3)]
        encoded = NvCompBatchCodec({algorithm!r}, device="cpu").encode_batch(data)
        device = [cp.asarray(np.frombuffer(memoryview(e), np.uint8)) for e in encoded]
        for trusted in (False, True):
            print("MODE trusted" if trusted else "MODE untrusted", file=sys.stderr, flush=True)
            codec = NvCompBatchCodec({algorithm!r}, device="cuda", trusted_input=trusted)
            out = codec.decode_batch(device)
            assert all(cp.asnumpy(o).tobytes() == d.tobytes() for o, d in zip(out, data))
        """,
        env={**os.environ, "ZARRS_NVCOMP_PROFILE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    untrusted, trusted = proc.stderr.split("MODE untrusted")[1].split("MODE trusted")
    assert "profile (ms since start)" in untrusted and "host check" in untrusted, untrusted
    assert "profile (ms since start)" in trusted and "host check" not in trusted, trusted
