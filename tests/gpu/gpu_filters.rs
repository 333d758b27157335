//! `CudaEngine::filter_chunks` on a real GPU: the byte swap of every word
//! size and the running sum of every `delta` type, over many chunks of one
//! launch (odd lengths, misaligned addresses, chunks large enough to span
//! many thread blocks), equal the host's `ElementFilters::apply`, which the
//! reader's CPU path uses and the reader tests check against zarrs; and
//! `CudaEngine::scale_offset_chunks` (numcodecs `fixedscaleoffset`) equals
//! the host's `ScaleOffset::apply` for every integer and float width.
//!
//! Ignored without a GPU; run with `cargo test --test gpu gpu_filters:: -- --include-ignored`.

use crate::common;

use std::sync::Arc;

use cudarc::driver::DevicePtr;
use zarrs_nvcomp::cuda::{CudaEngine, DeviceRegion, Widen};
use zarrs_nvcomp::{DeltaType, ElementFilters, ScaleOffset};

use common::Rng;

fn engine() -> Arc<CudaEngine> {
    CudaEngine::get(0).unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"))
}

/// Pseudo-random bytes.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    Rng(seed).bytes(len)
}

/// Floats of moderate size, as bytes, big endian where `swapped`: sums that
/// stay finite (random bytes soon sum to NaN, which the tests cover too).
fn floats(n: usize, seed: u64, wide: bool, swapped: bool) -> Vec<u8> {
    let raw = bytes(n * 4, seed);
    raw.chunks(4)
        .flat_map(|b| {
            let x = f64::from(i32::from_le_bytes(b.try_into().unwrap())) / 1e5;
            let mut element = if wide {
                x.to_le_bytes().to_vec()
            } else {
                (x as f32).to_le_bytes().to_vec()
            };
            if swapped {
                element.reverse();
            }
            element
        })
        .collect()
}

/// Runs `filters` over chunks of `lens` bytes (built by `make`) placed at
/// odd offsets of one device buffer, and compares each with the host's.
fn check(filters: ElementFilters, lens: &[usize], make: impl Fn(usize, u64) -> Vec<u8>) {
    let engine = engine();
    let chunks: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, len)| make(*len, i as u64)).collect();
    let offsets = misaligned_offsets(chunks.iter().map(Vec::len));
    let mut host = vec![0u8; *offsets.last().expect("the end")];
    for (c, at) in chunks.iter().zip(&offsets) {
        host[*at..at + c.len()].copy_from_slice(c);
    }
    let stream = engine.stream().clone();
    let buffer = stream.clone_htod(&host).unwrap();
    let (ptr, guard) = buffer.device_ptr(&stream);
    drop(guard);
    let regions: Vec<DeviceRegion> = chunks
        .iter()
        .zip(&offsets)
        .map(|(c, at)| DeviceRegion {
            ptr: ptr + *at as u64,
            len: c.len(),
        })
        .collect();
    // SAFETY: the regions lie in `buffer`, alive and unused meanwhile, and do not overlap.
    unsafe { engine.filter_chunks(&filters, &regions) }.unwrap();
    let got = stream.clone_dtoh(&buffer).unwrap();
    for (i, (c, at)) in chunks.iter().zip(&offsets).enumerate() {
        let mut want = c.clone();
        filters.apply(&mut want);
        assert!(
            got[*at..at + c.len()] == want[..],
            "{filters:?}: chunk {i} of {} bytes",
            c.len()
        );
    }
    // Bytes between the chunks are untouched.
    let mut outside = host.clone();
    for (c, at) in chunks.iter().zip(&offsets) {
        outside[*at..at + c.len()].copy_from_slice(&got[*at..at + c.len()]);
    }
    assert_eq!(got, outside);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn byte_swaps_equal_the_hosts() {
    for swap in [2, 4, 8] {
        let lens = [0, swap, 3 * swap + 1, 1000 * swap, (5 << 20) + swap + 3, 17];
        check(ElementFilters { swap, delta: None }, &lens, bytes);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn running_sums_equal_the_hosts() {
    for size in [1, 2, 4, 8] {
        for swap in [1, size] {
            let filters = ElementFilters {
                swap,
                delta: Some(DeltaType::Int(size)),
            };
            check(filters, &[size * 70_001, 0, 3 * size, size * 4096 + 1], bytes);
        }
    }
    for (delta, wide) in [(DeltaType::Float32, false), (DeltaType::Float64, true)] {
        for swap in [1, delta.size()] {
            let filters = ElementFilters {
                swap,
                delta: Some(delta),
            };
            let lens = [delta.size() * 100_003, delta.size(), delta.size() * 7];
            check(filters, &lens, |len, seed| {
                floats(len / delta.size(), seed, wide, swap > 1)
            });
            // Random bytes hold NaNs of every payload and infinities: the
            // device's sums give x86's NaNs, as the host's do, where its
            // additions alone would give one canonical NaN.
            check(filters, &[delta.size() * 5_003, delta.size() * 3], bytes);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scaled_integers_widen_as_on_the_host() {
    let engine = engine();
    let stream = engine.stream().clone();
    for stored_size in [1, 2, 4, 8] {
        for signed in [false, true] {
            for (wide, scale, offset) in [
                (false, 10.0, 0.1),
                (true, 10.0, 1000.1),
                (false, 3.5e-3, -7.0),
                (true, 0.25, 3.0),
            ] {
                let filter = ScaleOffset {
                    stored_size,
                    signed,
                    wide,
                    scale,
                    offset,
                };
                // Random integers of every value, 3 bytes past a boundary,
                // one chunk large enough to span many thread blocks.
                let lens = [stored_size * 300_007, 0, stored_size * 5, stored_size];
                let chunks: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, len)| bytes(*len, i as u64)).collect();
                let src_offsets = misaligned_offsets(chunks.iter().map(Vec::len));
                let dst_offsets = misaligned_offsets(chunks.iter().map(|c| filter.decoded_len(c.len())));
                let mut host = vec![0u8; *src_offsets.last().unwrap()];
                for (c, at) in chunks.iter().zip(&src_offsets) {
                    host[*at..at + c.len()].copy_from_slice(c);
                }
                let src = stream.clone_htod(&host).unwrap();
                let dst = stream.clone_htod(&vec![0xa5u8; *dst_offsets.last().unwrap()]).unwrap();
                let ((src_ptr, g1), (dst_ptr, g2)) = (src.device_ptr(&stream), dst.device_ptr(&stream));
                drop((g1, g2));
                let widen: Vec<Widen> = chunks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| Widen {
                        src: DeviceRegion {
                            ptr: src_ptr + src_offsets[i] as u64,
                            len: c.len(),
                        },
                        dst: dst_ptr + dst_offsets[i] as u64,
                    })
                    .collect();
                // SAFETY: sources in `src`, destinations in `dst`, alive and
                // unused meanwhile; no destination overlaps another.
                unsafe { engine.scale_offset_chunks(&filter, &widen) }.unwrap();
                let got = stream.clone_dtoh(&dst).unwrap();
                for (i, c) in chunks.iter().enumerate() {
                    let mut want = vec![0u8; filter.decoded_len(c.len())];
                    filter.apply(c, &mut want);
                    let at = dst_offsets[i];
                    assert!(got[at..at + want.len()] == want[..], "{filter:?}: chunk {i}");
                }
            }
        }
    }
}

/// Offsets of buffers of `lens` placed one after the other, each 3 bytes
/// past a multiple of 16 (misaligned), and the end.
fn misaligned_offsets(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut end = 3;
    for len in lens {
        offsets.push(end);
        end = (end + len).next_multiple_of(16) + 3;
    }
    offsets.push(end);
    offsets
}
