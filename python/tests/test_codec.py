"""numcodecs' own codec checks, configuration, pickling, out=, and errors."""

from __future__ import annotations

import array
import pickle

import numcodecs
import numpy as np
import pytest
from conftest import CPU_ALGORITHMS

import zarrs_nvcomp
from zarrs_nvcomp import DecodeError, GpuUnavailableError, NvCompBatchCodec

# numcodecs 0.17 wheels no longer ship numcodecs.tests; the development
# environment pins numcodecs 0.16 (python/requirements-dev.txt) so CI runs these.
common = pytest.importorskip("numcodecs.tests.common", reason="no numcodecs.tests here")

ARRAYS = [
    np.arange(1000, dtype="i4"),
    np.linspace(1000, 1001, 1000, dtype="f8"),
    np.random.default_rng(0).normal(loc=1000, scale=1, size=(100, 10)),
    np.random.default_rng(1).integers(0, 2, size=1000, dtype=bool).reshape(100, 10, order="F"),
    np.random.default_rng(2).integers(0, 200, size=1000, dtype="u1").reshape(10, 10, 10),
    np.arange(1000, dtype="u2").reshape(20, 50, order="F"),
    np.arange(1000, dtype="i8").view("M8[ns]"),
    np.arange(1000, dtype="i8").view("m8[m]"),
    np.zeros(0, dtype="f4"),
]


@pytest.fixture(params=CPU_ALGORITHMS)
def codec(request):
    return NvCompBatchCodec(request.param, device="cpu")


@pytest.mark.parametrize("arr", ARRAYS, ids=range(len(ARRAYS)))
def test_check_encode_decode(codec, arr):
    common.check_encode_decode(arr, codec)


def test_check_config(codec):
    common.check_config(codec)
    assert codec.get_config()["id"] == "nvcomp_batch"
    assert "device" not in codec.get_config()


def test_check_err_object_buffers(codec):
    common.check_err_decode_object_buffer(codec)
    common.check_err_encode_object_buffer(codec)


def test_check_max_buffer_size(codec):
    common.check_max_buffer_size(codec)
    # The check names the buffer and the limit; the default limits nothing.
    codec.max_buffer_size = 8
    with pytest.raises(ValueError, match=r"buffer 1 of the batch holds 9 bytes.*size is 8"):
        codec.encode_batch([b"x" * 8, b"x" * 9])
    del codec.max_buffer_size
    assert codec.decode(codec.encode(b"x" * 100)).tobytes() == b"x" * 100


def test_check_repr(monkeypatch):
    # numcodecs' check_repr evaluates in its own module namespace
    monkeypatch.setattr(common, "NvCompBatchCodec", NvCompBatchCodec, raising=False)
    for algorithm in CPU_ALGORITHMS:
        common.check_repr(f"NvCompBatchCodec(algorithm='{algorithm}')")
    common.check_repr("NvCompBatchCodec(algorithm='lz4', options={'has_header': False})")
    common.check_repr("NvCompBatchCodec(algorithm='gzip', options={'algorithm': 3}, device='cpu')")
    common.check_repr("NvCompBatchCodec(algorithm='zstd', max_decoded_size=1000)")
    common.check_repr("NvCompBatchCodec(algorithm='lz4', device_outputs='views')")
    # Short: options at their defaults are left out.
    short = repr(NvCompBatchCodec("LZ4", {"data_type": "int8"}))
    assert short == "NvCompBatchCodec(algorithm='lz4')"


def test_check_backwards_compatibility(codec, monkeypatch, request):
    # fixtures under tests/fixture/nvcomp_batch/<algorithm>: written once, then compared
    monkeypatch.chdir(request.path.parent)
    arrays = [
        np.arange(1000, dtype="i4"),
        np.linspace(1000, 1001, 1000, dtype="f8").reshape(100, 10),
        np.random.default_rng(3).integers(0, 200, size=1000, dtype="u1"),
    ]
    common.check_backwards_compatibility("nvcomp_batch", arrays, [codec], prefix=codec.algorithm)


def test_registry_without_import():
    import subprocess
    import sys

    code = (
        "import sys, numcodecs\n"
        "assert 'zarrs_nvcomp' not in sys.modules\n"
        "c = numcodecs.registry.get_codec(dict(id='nvcomp_batch', algorithm='snappy'))\n"
        "print(type(c).__module__, c.algorithm)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["zarrs_nvcomp.numcodecs", "snappy"]


def test_config_roundtrip_and_equality():
    a = NvCompBatchCodec("LZ4", {"data_type": "uint16"}, device="cpu")
    assert a.get_config() == {
        "id": "nvcomp_batch",
        "algorithm": "lz4",
        "options": {"data_type": "ushort", "has_header": True},
    }
    b = numcodecs.registry.get_codec(a.get_config())
    assert a == b
    assert a != NvCompBatchCodec("lz4")
    assert NvCompBatchCodec.from_config({"id": "nvcomp_batch", "algo": "zstd"}).algorithm == "zstd"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle(codec, protocol):
    c2 = pickle.loads(pickle.dumps(codec, protocol=protocol))
    assert c2 == codec and c2.device == codec.device and c2.backend == "cpu"
    limited = pickle.loads(pickle.dumps(NvCompBatchCodec("zstd", max_decoded_size=99), protocol))
    assert limited.max_decoded_size == 99
    views = NvCompBatchCodec("zstd", device="cpu", device_outputs="views")
    assert pickle.loads(pickle.dumps(views, protocol)).device_outputs == "views"
    data = np.arange(100, dtype="f4")
    np.testing.assert_array_equal(np.frombuffer(c2.decode(codec.encode(data)), "f4"), data)


def test_device_outputs_is_checked_and_not_stored():
    with pytest.raises(ValueError, match="device_outputs must be one of 'cupy', 'views'"):
        NvCompBatchCodec("lz4", device_outputs="numpy")
    views = NvCompBatchCodec("lz4", device="cpu", device_outputs="views")
    assert views.get_config() == NvCompBatchCodec("lz4").get_config()
    given = {**views.get_config(), "device_outputs": "views"}
    assert NvCompBatchCodec.from_config(given).device_outputs == "views"
    assert NvCompBatchCodec.from_config(views.get_config()).device_outputs == "cupy"


def test_backend_attribute():
    assert NvCompBatchCodec("lz4", device="cpu").backend == "cpu"
    expected = "cuda:0" if zarrs_nvcomp.gpu_available() else "cpu"
    assert NvCompBatchCodec("lz4").backend == expected


def test_input_kinds(codec):
    data = np.arange(64, dtype="f4")
    raw = data.tobytes()
    encoded = codec.encode_batch(
        [data, raw, bytearray(raw), memoryview(raw), array.array("f", data)]
    )
    assert all(isinstance(e, bytes) for e in encoded)
    decoded = codec.decode_batch(encoded)
    for d in decoded:
        assert isinstance(d, np.ndarray) and d.dtype == np.uint8 and d.ndim == 1
        assert d.tobytes() == raw
    assert codec.decode_batch([]) == [] and codec.encode_batch([]) == []


def test_decode_batch_views_one_buffer(codec):
    chunks = [np.arange(n, dtype="u1") for n in (10, 0, 30)]
    decoded = codec.decode_batch(codec.encode_batch(chunks))
    assert decoded[0].base is not None and decoded[0].base is decoded[2].base
    assert decoded[0].flags.writeable


def test_recycled_batches_are_not_shared(codec):
    # Batches of >= 1 MiB hand their allocation on once Python lets go of them:
    # a batch still referenced must never be reused, a released one is overwritten.
    rng = np.random.default_rng(3)
    batches = [[rng.integers(0, 50, 1 << 19, dtype="u1") for _ in range(4)] for _ in range(3)]
    encoded = [codec.encode_batch(b) for b in batches]
    held = codec.decode_batch(encoded[0])
    for _ in range(3):
        for chunks, enc in zip(batches[1:], encoded[1:], strict=True):
            got = codec.decode_batch(enc)
            assert all(np.array_equal(g, c) for g, c in zip(got, chunks, strict=True))
            del got
    assert all(np.array_equal(h, c) for h, c in zip(held, batches[0], strict=True))


def test_out(codec):
    chunks = [np.arange(n, dtype="i2") for n in (10, 0, 300)]
    encoded = codec.encode_batch(chunks)
    out = [np.empty_like(c) for c in chunks]
    result = codec.decode_batch(encoded, out=out)
    assert all(r is o for r, o in zip(result, out, strict=True))
    for c, o in zip(chunks, out, strict=True):
        np.testing.assert_array_equal(c, o)
    buf = bytearray(20)
    assert codec.decode(encoded[0], out=buf) is buf and bytes(buf) == chunks[0].tobytes()


def test_out_with_none_entries_allocates_them(codec):
    # kvikio's decode_batch allocated the outputs given as None
    chunks = [np.arange(n, dtype="i2") for n in (10, 0, 300, 7)]
    encoded = codec.encode_batch(chunks)
    given = [None, np.empty_like(chunks[1]), np.empty_like(chunks[2]), None]
    result = codec.decode_batch(encoded, out=given)
    assert result[1] is given[1] and result[2] is given[2]
    assert isinstance(result[0], np.ndarray) and isinstance(result[3], np.ndarray)
    for c, r in zip(chunks, result, strict=True):
        assert np.asarray(r).tobytes() == c.tobytes()
    assert [r.tobytes() for r in codec.decode_batch(encoded, out=[None] * 4)] == [
        c.tobytes() for c in chunks
    ]
    assert codec.decode(encoded[3], out=None).tobytes() == chunks[3].tobytes()


def test_out_with_none_entries_errors_name_the_batch_index(codec):
    encoded = codec.encode_batch([np.arange(10, dtype="u1")] * 3)
    with pytest.raises(ValueError, match="output buffer 2 holds 11 bytes"):
        codec.decode_batch(encoded, out=[None, None, np.empty(11, dtype="u1")])
    broken = encoded[1][: len(encoded[1]) // 2]
    with pytest.raises(DecodeError, match="buffer 1 of the batch"):
        codec.decode_batch([encoded[0], broken, encoded[2]], out=[np.empty(10, "u1"), None, None])


def test_out_wrong_size(codec):
    encoded = codec.encode_batch([np.arange(10, dtype="u1")])
    with pytest.raises(ValueError, match="decodes to 10 bytes"):
        codec.decode_batch(encoded, out=[np.empty(11, dtype="u1")])
    with pytest.raises(ValueError, match="output buffers"):
        codec.decode_batch(encoded, out=[])
    with pytest.raises(ValueError, match="read-only"):
        codec.decode(encoded[0], out=b"x" * 10)


def test_corrupt_data_names_index(codec):
    good = codec.encode(np.arange(1000, dtype="i4"))
    if codec.algorithm == "lz4":
        bad = b"\xff\xff\xff\x7f" + good[4:]  # declares a huge size
    elif codec.algorithm == "gdeflate":
        bad = good[:24] + b"\xff" * (len(good) - 24)
    else:
        bad = good[: len(good) // 2] + b"\xff" * 16
    with pytest.raises(DecodeError, match="buffer 1") as info:
        codec.decode_batch([good, bad, good])
    assert isinstance(info.value, RuntimeError)


def test_bad_algorithm_and_option():
    with pytest.raises(ValueError, match="valid algorithms: lz4, snappy"):
        NvCompBatchCodec("lzma")
    with pytest.raises(ValueError, match="valid options: data_type, has_header"):
        NvCompBatchCodec("lz4", {"level": 3})
    with pytest.raises(ValueError, match="0 to 5"):
        NvCompBatchCodec("deflate", {"algorithm": 9})
    with pytest.raises(ValueError, match="invalid device"):
        NvCompBatchCodec("lz4", device="tpu")
    with pytest.raises(GpuUnavailableError, match="needs a CUDA GPU"):
        NvCompBatchCodec("cascaded", device="cpu")


def test_cuda_without_gpu_says_why():
    reason = zarrs_nvcomp.gpu_unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is usable here")
    with pytest.raises(GpuUnavailableError) as info:
        NvCompBatchCodec("lz4", device="cuda")
    assert isinstance(info.value, RuntimeError)
    assert reason in str(info.value)
    assert any(w in str(info.value) for w in ("no libcuda", "no device", "driver", "nvCOMP"))
    with pytest.raises(GpuUnavailableError, match=r"cuda:7|no libcuda|no device"):
        NvCompBatchCodec("lz4", device="cuda:7")


def test_gil_released_during_work(codec):
    import threading

    data = [np.random.default_rng(i).integers(0, 4, 1 << 20, dtype="u1") for i in range(8)]
    encoded = codec.encode_batch(data)
    results = {}

    def work(i):
        results[i] = codec.decode_batch(encoded)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results.values():
        assert [x.tobytes() for x in r] == [d.tobytes() for d in data]


def test_kvikio_metadata_opens():
    # What kvikio's NvCompBatchCodec stored: its spellings, any case, its defaults.
    gdeflate = numcodecs.registry.get_codec(
        {"id": "nvcomp_batch", "algorithm": "Gdeflate", "options": {"algo": 1}}
    )
    assert gdeflate.algorithm == "gdeflate"
    assert gdeflate.options == {"algorithm": 1, "has_header": False}
    data = np.arange(4000, dtype="u2")  # kvikio's GDeflate chunks are at most 64 KiB
    assert gdeflate.decode(gdeflate.encode(data)).tobytes() == data.tobytes()
    assert NvCompBatchCodec.from_config(gdeflate.get_config()) == gdeflate

    lz4 = numcodecs.registry.get_codec(
        {"id": "nvcomp_batch", "algorithm": "LZ4", "options": {"data_type": 0}}
    )
    assert lz4.options == {"data_type": "char", "has_header": True}
    # kvikio's LZ4 with its header is numcodecs' LZ4 layout.
    raw = np.arange(5000, dtype="i4").tobytes()
    assert lz4.decode(numcodecs.LZ4().encode(raw)).tobytes() == raw
    options = {"has_header": False, "data_type": None}
    bare = numcodecs.registry.get_codec(
        {"id": "nvcomp_batch", "algorithm": "lz4", "options": options}
    )
    assert bare.options == {"data_type": "char", "has_header": False}
    for algorithm, options in [("zstd", {}), ("Snappy", {}), ("deflate", {"algo": 0})]:
        codec = numcodecs.registry.get_codec(
            {"id": "nvcomp_batch", "algorithm": algorithm, "options": options}
        )
        assert codec.decode(codec.encode(raw)).tobytes() == raw


def test_new_gdeflate_codecs_keep_the_header():
    codec = NvCompBatchCodec("gdeflate", {"algo": 2})
    assert codec.options == {"algorithm": 2, "has_header": True}
    # Pages behind the zarrs header: any size, unlike a bare stream.
    big = np.arange(100_000, dtype="u4")
    assert codec.decode(codec.encode(big)).tobytes() == big.tobytes()
    with pytest.raises(ValueError, match="65536"):
        NvCompBatchCodec.from_config({"id": "nvcomp_batch", "algorithm": "gdeflate"}).encode(big)


def test_kvikio_options_that_change_the_bitstream_are_rejected():
    with pytest.raises(ValueError, match='unknown option "num_RLEs"'):
        NvCompBatchCodec.from_config(
            {"id": "nvcomp_batch", "algorithm": "cascaded", "options": {"num_RLEs": 2}}
        )
    with pytest.raises(ValueError, match="given twice"):
        NvCompBatchCodec("deflate", {"algo": 1, "algorithm": 2})


def _zstd_frames():
    zstd = numcodecs.Zstd()
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    a = np.arange(3000, dtype="i4").tobytes()
    b = np.linspace(0, 1, 5000).tobytes()
    fa, fb = zstd.encode(a), zstd.encode(b)
    return [
        (fa + fb, a + b),
        (skippable + fa + skippable + fb + skippable, a + b),
        (fa + zstd.encode(b"") + fa, a + a),
    ]


@pytest.mark.parametrize("case", range(3))
def test_concatenated_zstd_frames_decode_as_numcodecs_does(case):
    buf, expected = _zstd_frames()[case]
    assert numcodecs.Zstd().decode(buf) == expected
    codec = NvCompBatchCodec("zstd", device="cpu")
    decoded = codec.decode_batch([buf, buf])
    assert [d.tobytes() for d in decoded] == [expected, expected]
    out = np.empty(len(expected), dtype="u1")
    assert codec.decode(buf, out=out).tobytes() == expected


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(3))
def test_concatenated_zstd_frames_decode_on_the_gpu(case):
    buf, expected = _zstd_frames()[case]
    codec = NvCompBatchCodec("zstd", device="cuda")
    decoded = codec.decode_batch([buf, codec.encode(b"single"), buf])
    assert [d.tobytes() for d in decoded] == [expected, b"single", expected]


def test_max_decoded_size_option():
    data = np.zeros(5000, dtype="u1")
    default = NvCompBatchCodec("zstd", device="cpu")
    assert default.max_decoded_size == zarrs_nvcomp.default_max_decoded_size()
    encoded = default.encode(data)
    low = NvCompBatchCodec("zstd", device="cpu", max_decoded_size=4999)
    with pytest.raises(DecodeError, match=r"limit of 4999 bytes.*max_decoded_size") as info:
        low.decode(encoded)
    assert "NvCompBatchCodec(..., max_decoded_size=...)" in str(info.value)
    exact = NvCompBatchCodec("zstd", device="cpu", max_decoded_size=5000)
    assert exact.decode(encoded).tobytes() == data.tobytes()
    # Not part of the configuration: data written with a limit reads without it.
    assert low.get_config() == default.get_config()


def test_a_frame_declaring_more_than_the_machine_holds_is_not_advised_a_higher_limit():
    # A Zstandard frame header declaring 50 GB, and an empty last raw block.
    frame = b"\x28\xb5\x2f\xfd\xe0" + (50 * 10**9).to_bytes(8, "little") + b"\x01\x00\x00"
    codec = NvCompBatchCodec("zstd", device="cpu")
    with pytest.raises(DecodeError, match="declares 50000000000 decoded bytes") as info:
        codec.decode_batch([frame])
    if 50 * 10**9 > zarrs_nvcomp.default_max_decoded_size():
        assert "machine's memory" in str(info.value) and "raise" not in str(info.value), info.value


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_max_decoded_size_holds_for_streams_without_a_declared_size(algorithm):
    # The entry-point fuzz: raw deflate decoded 2 bytes under a 1-byte limit.
    codec = NvCompBatchCodec(algorithm, device="cpu", max_decoded_size=1)
    encoded = NvCompBatchCodec(algorithm, device="cpu").encode_batch([b"\xae%"])
    with pytest.raises(zarrs_nvcomp.DecodeError):
        codec.decode_batch(encoded)
    exact = NvCompBatchCodec(algorithm, device="cpu", max_decoded_size=2)
    assert [bytes(memoryview(d)) for d in exact.decode_batch(encoded)] == [b"\xae%"]
