//! Device-resident decode throughput of the CUDA engine, and host-to-host LZ4.
//!
//! `cargo bench --bench gpu_decode` (or the stripped binary on a GPU machine).
//! Environment: `BENCH_MIB` (default 1024) sets the data size, `BENCH_ALGORITHMS`
//! (comma-separated) picks algorithms; `BENCH_DUMP=DIR`
//! writes each case's raw nvCOMP streams (`NAME.bin`, and `NAME.idx`: u64
//! stream sizes then u64 decoded sizes) and our figures (`ours.json`) so that
//! `benches/nvcomp_reference.py` can decode the very same streams with
//! nvCOMP's own Python API in the same run.

use std::time::Instant;

use zarrs_nvcomp::cuda::DeviceRegion;
use zarrs_nvcomp::{Algorithm, Backend, BatchCodec};

fn field_f32(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut x = 0f32;
    let mut out = Vec::with_capacity(len + 4);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        x += ((state % 2001) as f32 - 1000.0) / 10_000.0;
        out.extend_from_slice(&((x * 100.0).round() / 100.0).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Best of `reps` timings after one warm-up, in seconds.
fn best<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    f();
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Decoded bytes of each page of zarrs' `gdeflate` layout but the last.
const GDEFLATE_PAGE: usize = 64 * 1024;

/// The raw nvCOMP streams inside one of our buffers, with their decoded sizes.
/// The framings are those of the crate documentation: LZ4 behind a u32 LE
/// decoded length; gdeflate pages behind u64 LE decoded length, page count
/// and page sizes.
fn raw_streams<'a>(algorithm: &Algorithm, buf: &'a [u8], decoded: usize) -> Vec<(&'a [u8], usize)> {
    let word = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().unwrap()) as usize;
    match algorithm {
        Algorithm::Lz4 { has_header: true, .. } => vec![(&buf[4..], decoded)],
        Algorithm::Gdeflate { has_header: true, .. } => {
            let mut at = 8 * (2 + word(1));
            (0..word(1))
                .map(|i| {
                    let page = &buf[at..at + word(2 + i)];
                    at += page.len();
                    (page, GDEFLATE_PAGE.min(word(0) - i * GDEFLATE_PAGE))
                })
                .collect()
        }
        _ => vec![(buf, decoded)],
    }
}

fn main() {
    let mib: usize = std::env::var("BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let dump = std::env::var("BENCH_DUMP").ok().map(std::path::PathBuf::from);
    let data = field_f32(mib << 20);
    let mut figures = serde_json::Map::new();
    println!("device-resident decode, field_f32, {mib} MiB, best of 3 (GB/s of decoded data)");
    println!(
        "{:<10} {:>8} {:>7} {:>10} {:>12}",
        "algorithm", "chunk", "ratio", "decode", "decode_into"
    );
    let only = std::env::var("BENCH_ALGORITHMS").ok();
    let names = ["lz4", "zstd", "gdeflate", "snappy", "ans"];
    for name in names
        .into_iter()
        .filter(|n| only.as_deref().is_none_or(|o| o.split(',').any(|x| x == *n)))
    {
        let codec = match BatchCodec::new(name.parse().unwrap(), Backend::Cuda { device: 0 }) {
            Ok(c) => c,
            Err(e) => {
                println!("skipped: {e}");
                return;
            }
        };
        let engine = codec.cuda().unwrap().clone();
        let algorithm = *codec.algorithm();
        for chunk in [64 << 10, 1 << 20] {
            let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
            let encoded = codec.encode_batch(&chunks).unwrap();
            let ratio = data.len() as f64 / encoded.data().len() as f64;
            // One device allocation holding every buffer at a 256-byte boundary,
            // as separate allocations (nvCOMP's own Python API) would be.
            let starts: Vec<usize> = (0..encoded.len())
                .scan(0, |at, i| {
                    let start = *at;
                    *at = (start + encoded.range(i).len()).next_multiple_of(256);
                    Some(start)
                })
                .collect();
            let mut padded = vec![0u8; starts.last().unwrap() + encoded.range(encoded.len() - 1).len()];
            for (i, &start) in starts.iter().enumerate() {
                padded[start..start + encoded.range(i).len()].copy_from_slice(&encoded.data()[encoded.range(i)]);
            }
            let mut on_device = engine.alloc(padded.len()).unwrap();
            engine.stream().memcpy_htod(&padded, &mut on_device).unwrap();
            engine.stream().synchronize().unwrap();
            let (base, _guard) = cudarc::driver::DevicePtr::device_ptr(&on_device, engine.stream());
            let regions: Vec<DeviceRegion> = (0..encoded.len())
                .map(|i| DeviceRegion {
                    ptr: base + starts[i] as u64,
                    len: encoded.range(i).len(),
                })
                .collect();
            let t_alloc = best(3, || {
                let out = unsafe { engine.decode_device(&algorithm, &regions, 1 << 31) }.unwrap();
                assert_eq!(out.len(), regions.len());
            });
            let out = engine.alloc(data.len()).unwrap();
            let (out_base, _g) = cudarc::driver::DevicePtr::device_ptr(&out, engine.stream());
            let outs: Vec<DeviceRegion> = chunks
                .iter()
                .scan(0u64, |at, c| {
                    let r = DeviceRegion {
                        ptr: out_base + *at,
                        len: c.len(),
                    };
                    *at += c.len() as u64;
                    Some(r)
                })
                .collect();
            let t_into = best(3, || {
                unsafe { engine.decode_device_into(&algorithm, &regions, &outs, 1 << 31) }.unwrap();
            });
            let mut check = vec![0u8; data.len()];
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut check, out_base) }.unwrap();
            assert!(check == data, "{name} {chunk}: decoded data differs");
            let gbs = |t: f64| data.len() as f64 / t / 1e9;
            let case = format!("{name}_{}k", chunk >> 10);
            println!(
                "{name:<10} {:>7}K {ratio:>7.2} {:>10.1} {:>12.1}",
                chunk >> 10,
                gbs(t_alloc),
                gbs(t_into)
            );
            figures.insert(
                case.clone(),
                serde_json::json!({"decode": gbs(t_alloc), "decode_into": gbs(t_into), "ratio": ratio}),
            );
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).unwrap();
                let streams: Vec<(&[u8], usize)> = encoded
                    .iter()
                    .zip(&chunks)
                    .flat_map(|(b, c)| raw_streams(&algorithm, b, c.len()))
                    .collect();
                let mut bin = Vec::new();
                let mut idx: Vec<u8> = Vec::new();
                streams.iter().for_each(|(s, _)| bin.extend_from_slice(s));
                streams
                    .iter()
                    .for_each(|(s, _)| idx.extend_from_slice(&(s.len() as u64).to_le_bytes()));
                streams
                    .iter()
                    .for_each(|(_, d)| idx.extend_from_slice(&(*d as u64).to_le_bytes()));
                std::fs::write(dir.join(format!("{case}.bin")), bin).unwrap();
                std::fs::write(dir.join(format!("{case}.idx")), idx).unwrap();
            }
        }
    }
    // Host buffers in, host buffers out: LZ4, 1 MiB chunks.
    let codec = BatchCodec::new("lz4".parse().unwrap(), Backend::Cuda { device: 0 }).unwrap();
    let chunks: Vec<&[u8]> = data.chunks(1 << 20).collect();
    let encoded = codec.encode_batch(&chunks).unwrap();
    let inputs: Vec<&[u8]> = encoded.iter().collect();
    let t = best(3, || {
        codec.decode_batch(&inputs).unwrap();
    });
    let mut outs: Vec<Vec<u8>> = chunks.iter().map(|c| vec![0; c.len()]).collect();
    let t_into = best(3, || {
        let mut views: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
        codec.decode_batch_into(&inputs, &mut views).unwrap();
    });
    let cpu = BatchCodec::new("lz4".parse().unwrap(), Backend::Cpu).unwrap();
    let t_cpu = best(2, || {
        cpu.decode_batch(&inputs).unwrap();
    });
    let gbs = |t: f64| data.len() as f64 / t / 1e9;
    println!(
        "host-to-host LZ4 1 MiB: decode_batch {:.1} GB/s, decode_batch_into {:.1} GB/s, CPU backend ({} threads) {:.1} GB/s",
        gbs(t),
        gbs(t_into),
        rayon::current_num_threads(),
        gbs(t_cpu)
    );
    figures.insert(
        "host_lz4_1024k".into(),
        serde_json::json!({"decode": gbs(t), "decode_into": gbs(t_into), "cpu": gbs(t_cpu)}),
    );
    if let Some(dir) = &dump {
        std::fs::write(dir.join("ours.json"), serde_json::to_string_pretty(&figures).unwrap()).unwrap();
    }
}
