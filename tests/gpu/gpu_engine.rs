//! The CUDA backend on a real GPU: round trips of every algorithm, GPU ↔ CPU
//! bitstream compatibility, device-resident buffers, bad input.
//!
//! These tests need a CUDA GPU and nvCOMP, so they are ignored by default;
//! run them on a GPU machine with `cargo test --test gpu gpu_engine:: -- --include-ignored`.

use crate::common;

use std::sync::Arc;

use common::{field_f32, mixed_buffers};
use zarrs_nvcomp::cuda::{CudaEngine, DeviceRegion};
use zarrs_nvcomp::{Algorithm, Backend, BatchCodec, Error};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;
const GPU_ONLY: [&str; 3] = ["cascaded", "bitcomp", "ans"];
const WITH_CPU: [&str; 6] = ["lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate"];
const COMPAT_SIZES: [usize; 5] = [1, 1000, 64 * KIB, MIB, 20 * MIB];

fn gpu(name: &str) -> BatchCodec {
    let alg: Algorithm = name.parse().unwrap();
    match BatchCodec::new(alg, Backend::Cuda { device: 0 }) {
        Ok(codec) => codec,
        Err(e) => panic!("these tests need a CUDA GPU: {e}"),
    }
}

fn cpu(name: &str) -> BatchCodec {
    BatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap()
}

fn refs(bufs: &[Vec<u8>]) -> Vec<&[u8]> {
    bufs.iter().map(Vec::as_slice).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_algorithm_round_trips_on_the_gpu() {
    for name in WITH_CPU.iter().chain(&GPU_ONLY) {
        let codec = gpu(name);
        let sizes = [0, 1, 3, 1000, 4099, 64 * KIB, 64 * KIB + 1, MIB, 5 * MIB + 7];
        let inputs = mixed_buffers(&sizes, 7);
        let encoded = codec.encode_batch(&refs(&inputs)).unwrap();
        let decoded = codec.decode_batch(&encoded.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(decoded.len(), inputs.len(), "{name}");
        for (i, input) in inputs.iter().enumerate() {
            assert!(
                decoded.get(i) == input.as_slice(),
                "{name}: buffer {i} of {} bytes differs",
                input.len()
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_and_cpu_read_each_others_bitstreams() {
    let inputs = mixed_buffers(&COMPAT_SIZES, 11);
    for name in WITH_CPU {
        let (g, c) = (gpu(name), cpu(name));
        let from_gpu = g.encode_batch(&refs(&inputs)).unwrap();
        let from_cpu = c.encode_batch(&refs(&inputs)).unwrap();
        let on_cpu = c.decode_batch(&from_gpu.iter().collect::<Vec<_>>()).unwrap();
        let on_gpu = g.decode_batch(&from_cpu.iter().collect::<Vec<_>>()).unwrap();
        for (i, input) in inputs.iter().enumerate() {
            assert!(
                on_cpu.get(i) == input.as_slice(),
                "{name}: GPU-encoded buffer {i} ({} B) on CPU",
                input.len()
            );
            assert!(
                on_gpu.get(i) == input.as_slice(),
                "{name}: CPU-encoded buffer {i} ({} B) on GPU",
                input.len()
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_above_nvcomps_chunk_limit_keep_the_bitstream() {
    let big = vec![field_f32(64 * MIB, 3), field_f32(100, 4)];
    for name in ["lz4", "snappy", "zstd", "gzip", "deflate", "gdeflate"] {
        let encoded = gpu(name).encode_batch(&refs(&big)).unwrap();
        let encoded: Vec<&[u8]> = encoded.iter().collect();
        for codec in [gpu(name), cpu(name)] {
            let decoded = codec.decode_batch(&encoded).unwrap();
            assert!(
                decoded.get(0) == big[0].as_slice(),
                "{name} 64 MiB on {}",
                codec.backend()
            );
            assert!(
                decoded.get(1) == big[1].as_slice(),
                "{name} small on {}",
                codec.backend()
            );
        }
    }
    let err = gpu("ans").encode_batch(&refs(&big)).unwrap_err();
    assert!(matches!(err, Error::InputTooLarge { index: 0, .. }), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn streamed_zstd_and_bare_streams_are_sized_by_nvcomp() {
    let data = field_f32(300 * KIB, 5);
    let mut streamed = Vec::new();
    let mut enc = zstd::stream::Encoder::new(&mut streamed, 3).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, &data).unwrap();
    enc.finish().unwrap();
    assert_eq!(zstd::zstd_safe::get_frame_content_size(&streamed).unwrap(), None);
    let decoded = gpu("zstd").decode_batch(&[streamed.as_slice()]).unwrap();
    assert!(decoded.get(0) == data.as_slice());
    for config in [
        serde_json::json!({"algorithm": "lz4", "options": {"has_header": false}}),
        serde_json::json!({"algorithm": "gdeflate", "options": {"has_header": false}}),
    ] {
        let g = BatchCodec::from_config(&config, Backend::Cuda { device: 0 }).unwrap();
        let c = BatchCodec::from_config(&config, Backend::Cpu).unwrap();
        let inputs = vec![data[..60 * KIB].to_vec(), data[..1000].to_vec()];
        let encoded = g.encode_batch(&refs(&inputs)).unwrap();
        for codec in [&g, &c] {
            let decoded = codec.decode_batch(&encoded.iter().collect::<Vec<_>>()).unwrap();
            assert_eq!(decoded.to_vecs(), inputs, "{config} on {}", codec.backend());
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batches_of_zero_one_and_many_buffers() {
    let codec = gpu("lz4");
    assert!(codec.decode_batch::<&[u8]>(&[]).unwrap().is_empty());
    assert!(codec.encode_batch::<&[u8]>(&[]).unwrap().is_empty());
    let one = vec![field_f32(5000, 1)];
    let enc = codec.encode_batch(&refs(&one)).unwrap();
    assert_eq!(
        codec.decode_batch(&enc.iter().collect::<Vec<_>>()).unwrap().to_vecs(),
        one
    );
    let many: Vec<Vec<u8>> = (0..100_000).map(|i| field_f32(16 + i % 200, i as u64)).collect();
    let enc = codec.encode_batch(&refs(&many)).unwrap();
    let dec = codec.decode_batch(&enc.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(dec.len(), many.len());
    assert!(many.iter().enumerate().all(|(i, m)| dec.get(i) == m.as_slice()));
}

/// Feeds a truncated buffer (and, where `garbage`, random bytes) to the GPU
/// decoder of `name` and expects an error naming the bad buffer.
///
/// Only formats whose corruption the crate or nvCOMP detects are tested:
/// nvCOMP's other decoders have undefined behaviour on corrupt input (see the
/// crate docs; ANS was seen decoding a truncated buffer without error), which
/// could end the test process's GPU context.
fn corruption_is_reported(name: &str, garbage: bool) {
    let detected = |e: &Result<zarrs_nvcomp::Batch, Error>, index: usize| matches!(e, Err(Error::Corrupt { index: i, .. } | Error::DecodedSizeTooLarge { index: i, .. }) if *i == index);
    let codec = gpu(name);
    let inputs = mixed_buffers(&[2000, 70_000, 3000], 9);
    let encoded = codec.encode_batch(&refs(&inputs)).unwrap().to_vecs();
    let mut truncated = encoded.clone();
    let half = truncated[1].len() / 2;
    truncated[1].truncate(half);
    let result = codec.decode_batch(&refs(&truncated));
    assert!(detected(&result, 1), "{name}: truncated buffer 1 gave {result:?}");
    if garbage {
        let mut bad = encoded.clone();
        bad[2] = common::random_bytes(bad[2].len(), 99);
        let result = codec.decode_batch(&refs(&bad));
        assert!(detected(&result, 2), "{name}: garbage buffer 2 gave {result:?}");
    }
    let decoded = codec.decode_batch(&refs(&encoded)).unwrap();
    assert_eq!(
        decoded.to_vecs(),
        inputs,
        "{name}: the codec still works after bad input"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn corrupt_lz4_is_reported() {
    corruption_is_reported("lz4", true);
    // 4 GiB declared: above a limit set below it (the default is the
    // machine's memory, which a GPU machine may well exceed 4 GiB of).
    let huge = [0xffu8, 0xff, 0xff, 0xff, 1, 2, 3];
    let err = gpu("lz4")
        .with_max_decoded_size(1 << 30)
        .decode_batch(&[&huge[..]])
        .unwrap_err();
    assert!(matches!(err, Error::DecodedSizeTooLarge { index: 0, .. }), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn corrupt_snappy_is_reported() {
    corruption_is_reported("snappy", true);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn corrupt_zstd_is_reported() {
    corruption_is_reported("zstd", true);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn truncated_gdeflate_is_reported() {
    corruption_is_reported("gdeflate", false);
}

/// Every 7th byte of the last two thirds XORed: nvCOMP's own decoders fault
/// or never finish on such buffers; untrusted decodes run in the worker
/// process, so the batch's error names the buffer and the engine stays usable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn corrupt_payloads_are_reported_by_every_decoder_with_a_cpu_twin() {
    for name in WITH_CPU {
        let codec = gpu(name);
        let inputs = mixed_buffers(&[2000, 70_000, 3000], 5);
        let encoded = codec.encode_batch(&refs(&inputs)).unwrap().to_vecs();
        let mut bad = encoded.clone();
        let len = bad[1].len();
        for i in (len / 3..len).step_by(7) {
            bad[1][i] ^= 0x5A;
        }
        let cpu = BatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap();
        let cpu_result = cpu.decode_batch(&refs(&bad));
        match (cpu_result, codec.decode_batch(&refs(&bad))) {
            (Err(_), Err(e)) => assert!(
                matches!(
                    e,
                    Error::Corrupt { index: 1, .. } | Error::DecodedSizeTooLarge { index: 1, .. }
                ),
                "{name}: {e}"
            ),
            (Ok(cpu), Ok(gpu)) => assert_eq!(cpu.to_vecs(), gpu.to_vecs(), "{name}"),
            (cpu, gpu) => panic!(
                "{name}: the CPU gave {:?}, the GPU {:?}",
                cpu.map(|_| ()),
                gpu.map(|_| ())
            ),
        }
        let decoded = codec.decode_batch(&refs(&encoded)).unwrap();
        assert_eq!(decoded.to_vecs(), inputs, "{name}: the engine still works");
    }
}

/// nvCOMP's deflate decoder accepts matches reaching before the start of the
/// output; untrusted streams are inflated on the host up to 32 KiB of output
/// first, so the batch fails as on the CPU, naming the buffer, for raw
/// DEFLATE and gzip members, from host and device memory.
#[test]
#[ignore = "needs a CUDA GPU"]
fn deflate_matches_before_the_output_are_reported() {
    // A fixed-Huffman block whose first symbol is a match at distance 1.
    let bad = vec![3u8, 2, 0];
    let gzip_header = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    // CRC-32 and length of "aaa", what the match would copy had it a byte before it.
    let trailer = [0x2d, 0x73, 0x07, 0xf0, 3, 0, 0, 0];
    let bad_member = [&gzip_header[..], &bad, &trailer].concat();
    let inputs = mixed_buffers(&[2000, 70_000], 3);
    for (name, bad) in [("deflate", bad), ("gzip", bad_member)] {
        let codec = gpu(name);
        let mut batch = codec.encode_batch(&refs(&inputs)).unwrap().to_vecs();
        batch.insert(1, bad);
        let cpu_err = cpu(name).decode_batch(&refs(&batch)).unwrap_err();
        let err = codec.decode_batch(&refs(&batch)).unwrap_err();
        assert!(matches!(err, Error::Corrupt { index: 1, .. }), "{name}: {err}");
        assert_eq!(err.to_string(), cpu_err.to_string(), "{name}");
        // The same batch packed back to back in device memory.
        let engine: &Arc<CudaEngine> = codec.cuda().unwrap();
        let alg: Algorithm = name.parse().unwrap();
        // SAFETY: the regions are live device memory of this engine.
        let err = on_device(engine, &batch, |regions| unsafe {
            engine.decode_device(&alg, regions, 1 << 30)
        })
        .unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { index: 1, .. }),
            "{name}, device inputs: {err}"
        );
    }
}

/// Runs `f` on `batch` packed back to back in new device memory of
/// `engine`: the regions of its buffers.
fn on_device<T>(engine: &Arc<CudaEngine>, batch: &[Vec<u8>], f: impl FnOnce(&[DeviceRegion]) -> T) -> T {
    let packed = batch.concat();
    let mut memory = engine.alloc(packed.len().max(1)).unwrap();
    // On the engine's stream, after the zeroing `alloc` enqueued there.
    engine
        .stream()
        .memcpy_htod(&packed, &mut memory.slice_mut(..packed.len()))
        .unwrap();
    engine.stream().synchronize().unwrap();
    let (base, _guard) = cudarc::driver::DevicePtr::device_ptr(&memory, engine.stream());
    let starts = batch.iter().scan(0, |at, b| {
        *at += b.len();
        Some(*at - b.len())
    });
    let regions: Vec<DeviceRegion> = starts
        .zip(batch)
        .map(|(start, b)| DeviceRegion {
            ptr: base + start as u64,
            len: b.len(),
        })
        .collect();
    f(&regions)
}

/// nvCOMP's Zstandard decoder does not check the Huffman tree of a block's
/// literals: untrusted frames have it checked on the host, those in device
/// memory through a copy, so that the fuzz corpus' frame nvCOMP accepted is
/// rejected as the CPU rejects it, naming the buffer, and valid frames
/// still decode.
#[test]
#[ignore = "needs a CUDA GPU"]
fn zstd_literal_trees_in_device_memory_are_checked() {
    let (_, batch, valid) = common::corpus::gpu_corpus("zstd")
        .into_iter()
        .find(|(name, ..)| name == "zstd-bitflip-9c0f9a540e7c.json")
        .expect("the corpus holds the case");
    let codec = gpu("zstd");
    let engine: &Arc<CudaEngine> = codec.cuda().unwrap();
    let cpu_err = cpu("zstd").decode_batch(&refs(&batch)).unwrap_err();
    assert!(matches!(cpu_err, Error::Corrupt { index: 1, .. }), "{cpu_err}");
    // SAFETY: the regions are live device memory of this engine.
    let err = on_device(engine, &batch, |regions| unsafe {
        engine.decode_device(&Algorithm::Zstd, regions, 1 << 30)
    })
    .unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { index: 1, reason } if reason.contains("Huffman tree")),
        "{err}"
    );
    let expected = cpu("zstd").decode_batch(&refs(&valid)).unwrap().to_vecs();
    // SAFETY: as above.
    let decoded = on_device(engine, &valid, |regions| unsafe {
        engine.decode_device(&Algorithm::Zstd, regions, 1 << 30)
    })
    .unwrap();
    assert_eq!(decoded.to_host().unwrap().to_vecs(), expected);
}

/// The Huffman streams of untrusted Zstandard literals are checked by the
/// crate's kernel where the batch is staged: of frames with flipped bits,
/// those the GPU path decodes the CPU decodes to the same bytes, from host
/// and from device memory, and the kernel's refusals (streams that do not
/// decode to exactly their literals) name the buffer and the stream.
#[test]
#[ignore = "needs a CUDA GPU"]
fn zstd_literal_streams_are_checked_on_the_device() {
    let good = zstd::bulk::compress(&field_f32(70_000, 6), 1).unwrap();
    zstd_mutants_decode_as_on_the_cpu(3, (&good, 40), 200, &["literal stream at byte"], 20);
}

/// The sequences of untrusted Zstandard frames are walked by the crate's
/// kernel, one thread a frame, where the batch is staged, in batches of more
/// sequences than the host walks (8 Mi; the 100 intact frames here hold about
/// 107,000 each): as above, and the refusals of the walk (matches before the
/// output, sequences past the literals or the bit stream) name the buffer
/// and the block.
#[test]
#[ignore = "needs a CUDA GPU"]
fn zstd_sequences_are_walked_on_the_device() {
    // Words drawn from 64: a sequence every 9 bytes or so at level 1.
    let mut rng = common::Rng(5);
    let words: Vec<u8> = (0..250_000)
        .flat_map(|_| (rng.next_u64() % 64 * 0x0101_0307).to_le_bytes()[..4].to_vec())
        .collect();
    let good = zstd::bulk::compress(&words, 1).unwrap();
    zstd_mutants_decode_as_on_the_cpu(
        1,
        (&good, 100),
        40,
        &[
            "a match reaches",
            "sequences' bit stream",
            "past the block's literals",
            "frame decodes to",
        ],
        4,
    );
}

/// Decodes `mutants` mutants of a Zstandard frame of `level`, each in a
/// batch after `copies` of the intact frame `good`, on the GPU from host
/// and device memory and on the CPU: what the GPU decodes equals the CPU's
/// bytes, and at least `least` refusals name one of `reasons`.
fn zstd_mutants_decode_as_on_the_cpu(
    level: i32,
    (good, copies): (&[u8], usize),
    mutants: usize,
    reasons: &[&str],
    least: usize,
) {
    let codec = gpu("zstd");
    let engine: &Arc<CudaEngine> = codec.cuda().unwrap();
    let data = field_f32(300_000, 5);
    let frame = zstd::bulk::compress(&data, level).unwrap();
    let mut rng = common::Rng(77);
    let mut next = || rng.next_u64();
    let (mut named, mut decoded) = (0, 0);
    for m in 0..mutants {
        let mut bad = frame.clone();
        let at = 16 + (next() as usize) % (bad.len() - 16);
        bad[at] ^= 1 << (next() % 8);
        let mut batch = vec![good.to_vec(); copies];
        batch.push(bad);
        let on_cpu = cpu("zstd").decode_batch(&refs(&batch)).map(|b| b.to_vecs());
        let from_host = codec.decode_batch(&refs(&batch)).map(|b| b.to_vecs());
        // SAFETY: the regions are live device memory of this engine.
        let from_device = on_device(engine, &batch, |regions| unsafe {
            engine.decode_device(&Algorithm::Zstd, regions, 1 << 30)
        })
        .and_then(|d| d.to_host())
        .map(|b| b.to_vecs());
        for got in [&from_host, &from_device] {
            match got {
                Ok(bytes) => {
                    decoded += 1;
                    assert_eq!(
                        Some(bytes),
                        on_cpu.as_ref().ok(),
                        "mutant {m} at byte {at}: GPU decoded it"
                    );
                }
                Err(Error::Corrupt { index, reason }) => {
                    assert_eq!(*index, copies, "mutant {m}: {reason}");
                    named += usize::from(reasons.iter().any(|r| reason.contains(r)));
                }
                Err(e) => panic!("mutant {m}: {e}"),
            }
        }
        assert_eq!(from_host.is_ok(), from_device.is_ok(), "mutant {m}");
    }
    assert!(named >= least, "only {named} refusals named one of {reasons:?}");
    assert!(
        decoded > 0,
        "no mutant decoded: the test checks nothing of accepted ones"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_buffers_stay_on_the_device() {
    for name in WITH_CPU.iter().chain(&GPU_ONLY) {
        let codec = gpu(name);
        let engine: &Arc<CudaEngine> = codec.cuda().unwrap();
        let inputs = mixed_buffers(&[0, 10, 5000, 64 * KIB, 300 * KIB], 21);
        let mut device_inputs = Vec::new();
        for input in &inputs {
            let mut slice = engine.alloc(input.len().max(1)).unwrap();
            engine
                .stream()
                .memcpy_htod(input.as_slice(), &mut slice.slice_mut(..input.len()))
                .unwrap();
            device_inputs.push(slice);
        }
        engine.stream().synchronize().unwrap();
        let regions: Vec<DeviceRegion> = device_inputs
            .iter()
            .zip(&inputs)
            .map(|(s, i)| {
                let (ptr, _guard) = cudarc::driver::DevicePtr::device_ptr(s, engine.stream());
                DeviceRegion { ptr, len: i.len() }
            })
            .collect();
        let algorithm = *codec.algorithm();
        let encoded = unsafe { engine.encode_device(&algorithm, &regions) }.unwrap();
        // Device-encoded bytes equal what the host path writes for the same chunks' decode.
        let host_encoded = encoded.to_host().unwrap();
        let on_host = codec.decode_batch(&host_encoded.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(on_host.to_vecs(), inputs, "{name}: device-encoded, host-decoded");
        let enc_regions: Vec<DeviceRegion> = (0..encoded.len()).map(|i| encoded.region(i)).collect();
        let decoded = unsafe { engine.decode_device(&algorithm, &enc_regions, 1 << 30) }.unwrap();
        assert_eq!(
            decoded.to_host().unwrap().to_vecs(),
            inputs,
            "{name}: device round trip"
        );
        // Packed back to back from an odd address, as a file read into one
        // allocation would be: inputs nvCOMP cannot read in place get staged.
        let packed = engine.alloc(host_encoded.data().len() + 1).unwrap();
        // The zeroing `alloc` enqueued on the engine's stream runs first.
        engine.stream().synchronize().unwrap();
        let (packed_base, _guard) = cudarc::driver::DevicePtr::device_ptr(&packed, engine.stream());
        unsafe { cudarc::driver::result::memcpy_htod_sync(packed_base + 1, host_encoded.data()) }.unwrap();
        let packed_regions: Vec<DeviceRegion> = (0..host_encoded.len())
            .map(|i| DeviceRegion {
                ptr: packed_base + 1 + host_encoded.range(i).start as u64,
                len: host_encoded.range(i).len(),
            })
            .collect();
        let decoded = unsafe { engine.decode_device(&algorithm, &packed_regions, 1 << 30) }.unwrap();
        assert_eq!(
            decoded.to_host().unwrap().to_vecs(),
            inputs,
            "{name}: misaligned packed inputs"
        );
        // Into caller-owned buffers, one of them deliberately misaligned.
        let total: usize = inputs.iter().map(Vec::len).sum::<usize>() + 64;
        let out = engine.alloc(total).unwrap();
        let (base, _guard) = cudarc::driver::DevicePtr::device_ptr(&out, engine.stream());
        let mut at = 1u64;
        let outs: Vec<DeviceRegion> = inputs
            .iter()
            .map(|i| {
                let r = DeviceRegion {
                    ptr: base + at,
                    len: i.len(),
                };
                at += i.len() as u64 + 8;
                r
            })
            .collect();
        unsafe { engine.decode_device_into(&algorithm, &enc_regions, &outs, 1 << 30) }.unwrap();
        for (r, input) in outs.iter().zip(&inputs) {
            let mut host = vec![0u8; r.len];
            if r.len > 0 {
                unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut host, r.ptr) }.unwrap();
            }
            assert!(host == *input, "{name}: decode_device_into");
        }
        let wrong = [DeviceRegion { ptr: base, len: 1 }; 5];
        let err = unsafe { engine.decode_device_into(&algorithm, &enc_regions, &wrong, 1 << 30) }.unwrap_err();
        assert!(matches!(err, Error::OutputSize { .. }), "{name}: {err}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn host_outputs_and_many_threads() {
    let codec = Arc::new(gpu("zstd"));
    let inputs = mixed_buffers(&[1000, 70_000, MIB], 31);
    let encoded = codec.encode_batch(&refs(&inputs)).unwrap().to_vecs();
    let mut outs: Vec<Vec<u8>> = inputs.iter().map(|i| vec![0; i.len()]).collect();
    let mut views: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    codec.decode_batch_into(&refs(&encoded), &mut views).unwrap();
    assert_eq!(outs, inputs);
    let mut short: Vec<Vec<u8>> = inputs.iter().map(|i| vec![0; i.len() - 1]).collect();
    let mut views: Vec<&mut [u8]> = short.iter_mut().map(Vec::as_mut_slice).collect();
    assert!(matches!(
        codec.decode_batch_into(&refs(&encoded), &mut views),
        Err(Error::OutputSize { index: 0, .. })
    ));
    std::thread::scope(|s| {
        for t in 0..8 {
            let (codec, encoded, inputs) = (codec.clone(), &encoded, &inputs);
            s.spawn(move || {
                for _ in 0..10 {
                    let d = codec.decode_batch(&refs(encoded)).unwrap();
                    assert_eq!(d.to_vecs(), *inputs, "thread {t}");
                }
            });
        }
    });
}

#[test]
fn without_a_gpu_the_reason_is_given() {
    match BatchCodec::gpu_availability(0) {
        Ok(()) => eprintln!("a GPU is usable here; the GPU tests run with --include-ignored"),
        Err(reason) => {
            let message = reason.to_string();
            assert!(!message.is_empty());
            let err = BatchCodec::new("lz4".parse().unwrap(), Backend::Cuda { device: 0 }).unwrap_err();
            assert!(err.to_string().contains(&message), "{err}");
            let auto = BatchCodec::new("lz4".parse().unwrap(), Backend::Auto).unwrap();
            assert_eq!(auto.backend(), zarrs_nvcomp::BackendKind::Cpu);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn concatenated_zstd_frames_decode_on_the_gpu() {
    // Frames back to back (numcodecs' Zstd reads them): one with its size, a
    // streamed one, a skippable frame between; each frame is one nvCOMP chunk.
    let a = field_f32(200 * KIB, 9);
    let b = field_f32(70 * KIB, 10);
    let sized = zstd::bulk::compress(&a, 1).unwrap();
    let mut streamed = Vec::new();
    let mut enc = zstd::stream::Encoder::new(&mut streamed, 3).unwrap();
    std::io::Write::write_all(&mut enc, &b).unwrap();
    enc.finish().unwrap();
    let mut skippable = 0x184D_2A50u32.to_le_bytes().to_vec();
    skippable.extend(3u32.to_le_bytes());
    skippable.extend(b"abc");
    let frames = [&sized[..], &skippable, &streamed, &sized].concat();
    let expected = [&a[..], &b, &a].concat();
    let single = zstd::bulk::compress(&b, 1).unwrap();
    let codec = gpu("zstd");
    let decoded = codec.decode_batch(&[frames.as_slice(), &single, &frames]).unwrap();
    assert!(decoded.get(0) == expected.as_slice());
    assert!(decoded.get(1) == b.as_slice());
    assert!(decoded.get(2) == expected.as_slice());
    let mut out = vec![0u8; expected.len()];
    codec.decode_batch_into(&[frames.as_slice()], &mut [&mut out]).unwrap();
    assert!(out == expected);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_outputs_default_to_the_devices_memory() {
    let codec = gpu("zstd");
    let engine = codec.cuda().unwrap();
    assert!(engine.total_memory() > 1 << 30, "{}", engine.total_memory());
    assert_eq!(codec.max_device_decoded_size(), engine.total_memory());
    assert_eq!(codec.max_decoded_size(), zarrs_nvcomp::default_max_decoded_size());
    assert_eq!(codec.with_max_decoded_size(10).max_device_decoded_size(), 10);
}

/// A Zstandard frame of `data` with a content checksum (sized, or streamed).
fn zstd_with_checksum(data: &[u8], sized: bool) -> Vec<u8> {
    let mut frame = Vec::new();
    let mut enc = zstd::stream::Encoder::new(&mut frame, 3).unwrap();
    enc.include_checksum(true).unwrap();
    if sized {
        enc.set_pledged_src_size(Some(data.len() as u64)).unwrap();
        enc.include_contentsize(true).unwrap();
    }
    std::io::Write::write_all(&mut enc, data).unwrap();
    enc.finish().unwrap();
    frame
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn zstd_content_checksums_are_checked_on_the_gpu() {
    // nvCOMP's decoder ignores the checksum; the engine checks it on the device.
    let data = [field_f32(300 * KIB, 11), field_f32(64 * KIB, 12)];
    for sized in [true, false] {
        let frames: Vec<Vec<u8>> = data.iter().map(|d| zstd_with_checksum(d, sized)).collect();
        for trusted in [false, true] {
            let codec = gpu("zstd").with_trusted_input(trusted);
            let decoded = codec.decode_batch(&refs(&frames)).unwrap();
            assert!(decoded.get(0) == data[0].as_slice() && decoded.get(1) == data[1].as_slice());
            let mut bad = frames.clone();
            let last = bad[1].len() - 1;
            bad[1][last] ^= 0x40;
            assert!(
                cpu("zstd").decode_batch(&refs(&bad)).is_err(),
                "the CPU rejects the checksum"
            );
            let err = codec.decode_batch(&refs(&bad)).unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { index: 1, reason } if reason.contains("content checksum mismatch")),
                "sized {sized}, trusted {trusted}: {err}"
            );
            // The engine is still usable after a mismatch.
            assert!(codec.decode_batch(&refs(&frames)).unwrap().get(0) == data[0].as_slice());
        }
    }
}
