//! `CudaEngine::unshuffle_blocks` on a real GPU: many blocks of every
//! shuffle, typesize and length (trailing bytes, short bitshuffled blocks,
//! misaligned addresses, blocks large enough to span many thread blocks) in
//! one launch equal the shuffles' definitions, written out here (the crate's
//! host unshuffle is checked against c-blosc in `blosc::format_tests`).
//!
//! Ignored without a GPU; run with `cargo test --release --test gpu_unshuffle -- --include-ignored`.

use std::sync::Arc;

use cudarc::driver::DevicePtr;
use zarrs_nvcomp::cuda::{BlockUnshuffle, CudaEngine};
use zarrs_nvcomp::Shuffle;

fn engine() -> Arc<CudaEngine> {
    CudaEngine::get(0).unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"))
}

/// Pseudo-random bytes.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The host's reading of a block of `len` bytes, written from the shuffles'
/// definitions (the blosc format's module documentation): bitshuffle only
/// where the elements are a whole number of groups of 8, as c-blosc writes.
fn host_unshuffle(block: &[u8], typesize: usize, shuffle: Shuffle) -> Vec<u8> {
    let m = block.len() / typesize;
    let mut out = block.to_vec();
    match shuffle {
        // Byte j of element i was stored at j * m + i.
        Shuffle::Byte if typesize > 1 => {
            for i in 0..m {
                for j in 0..typesize {
                    out[i * typesize + j] = block[j * m + i];
                }
            }
        }
        // Bit k of byte j of element i was stored as bit i % 8 of byte
        // (j * 8 + k) * m / 8 + i / 8.
        Shuffle::Bit if m > 0 && m.is_multiple_of(8) => {
            for i in 0..m {
                for j in 0..typesize {
                    let mut byte = 0u8;
                    for k in 0..8 {
                        let stored = block[(j * 8 + k) * m / 8 + i / 8];
                        byte |= ((stored >> (i % 8)) & 1) << k;
                    }
                    out[i * typesize + j] = byte;
                }
            }
        }
        _ => {}
    }
    out
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn blocks_unshuffle_as_on_the_host() {
    let engine = engine();
    let mut cases = Vec::new();
    for shuffle in [Shuffle::None, Shuffle::Byte, Shuffle::Bit] {
        for typesize in [1, 2, 3, 4, 8, 16] {
            for len in [1, 7, 64, 8 * 24 + 5, 4096, 4099, 1 << 20] {
                cases.push((shuffle, typesize, len));
            }
        }
    }
    // Sources back to back, each one byte past the previous source's end
    // (misaligned); destinations likewise in their own buffer.
    let mut starts = Vec::with_capacity(cases.len());
    let mut total = 0;
    for (_, _, len) in &cases {
        starts.push(total + 1);
        total += len + 1;
    }
    let mut src_host = vec![0u8; total];
    for (k, ((_, _, len), start)) in cases.iter().zip(&starts).enumerate() {
        src_host[*start..start + len].copy_from_slice(&bytes(*len, k as u64));
    }
    let stream = engine.stream().clone();
    let src = stream.clone_htod(&src_host).unwrap();
    let dst = engine.alloc(total).unwrap();
    let (src_ptr, guard) = src.device_ptr(&stream);
    drop(guard);
    let (dst_ptr, guard) = dst.device_ptr(&stream);
    drop(guard);
    let blocks: Vec<BlockUnshuffle> = cases
        .iter()
        .zip(&starts)
        .map(|(&(shuffle, typesize, len), &start)| BlockUnshuffle {
            src: src_ptr + start as u64,
            dst: dst_ptr + start as u64,
            len,
            typesize,
            shuffle,
        })
        .collect();
    // SAFETY: every block lies within `src` and `dst`, both of this engine
    // and alive until the call returns; the blocks do not overlap.
    unsafe { engine.unshuffle_blocks(&blocks) }.unwrap();
    let out = stream.clone_dtoh(&dst).unwrap();
    for (&(shuffle, typesize, len), &start) in cases.iter().zip(&starts) {
        let expected = host_unshuffle(&src_host[start..start + len], typesize, shuffle);
        assert!(
            out[start..start + len] == expected[..],
            "{shuffle:?} typesize {typesize}, {len} bytes: the GPU's unshuffle differs from the host's"
        );
        // The byte before each destination (between blocks) stays as allocated.
        assert_eq!(
            out[start - 1],
            0,
            "{shuffle:?} typesize {typesize}, {len} bytes: wrote before its block"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_blocks_launch_nothing() {
    let engine = engine();
    // SAFETY: no memory is named.
    unsafe { engine.unshuffle_blocks(&[]) }.unwrap();
}
