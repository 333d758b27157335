//! `CudaEngine::decode_scatter` on a real GPU: decoded buffers and fill rows
//! land where the scatter puts them, wrong sizes and mismatched batches are
//! errors naming the buffer, and host-output batches of mismatched lengths
//! are errors rather than panics, and zlib Adler-32 trailers are checked on
//! the device.
//!
//! Ignored without a GPU; run with `cargo test --release --test gpu_scatter -- --include-ignored`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use zarrs_nvcomp::cuda::{CudaEngine, DecodeOptions, DeviceRegion, RowCopy, Scatter};
use zarrs_nvcomp::{Algorithm, Backend, BatchCodec, Error};

/// Bytes per row of the 8-row output the tests scatter into.
const PITCH: usize = 24;
const OUT_LEN: usize = 8 * PITCH;
const FILL: u8 = 0xab;

fn engine() -> Arc<CudaEngine> {
    CudaEngine::get(0).unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"))
}

/// Two 8x8 chunks of bytes, `a` and `b`, LZ4-encoded by the CPU.
fn chunks() -> (Vec<u8>, Vec<u8>, Vec<Vec<u8>>) {
    let a: Vec<u8> = (0..64).collect();
    let b: Vec<u8> = (100..164).collect();
    let encoded = BatchCodec::new(lz4(), Backend::Cpu)
        .unwrap()
        .encode_batch(&[&a, &b])
        .unwrap()
        .to_vecs();
    (a, b, encoded)
}

fn lz4() -> Algorithm {
    "lz4".parse().unwrap()
}

fn rows(src_offset: usize, dst_offset: usize, width: usize, rows: usize, src_pitch: usize) -> RowCopy {
    RowCopy {
        src_offset,
        dst_offset,
        width,
        rows,
        src_pitch,
        dst_pitch: PITCH,
    }
}

/// Chunk `a` whole in columns 0..8; columns 1..5 of rows 2..6 of chunk `b`
/// in rows 0..4, columns 8..12; the fill value in rows 4..8, columns 16..24.
fn scatter() -> Scatter {
    Scatter {
        decoded_lens: vec![64, 64],
        copies: vec![(0, rows(0, 0, 8, 8, 8)), (1, rows(2 * 8 + 1, 8, 4, 4, 8))],
        fill_value: vec![FILL],
        fills: vec![rows(0, 4 * PITCH + 16, 8, 4, 0)],
        ..Scatter::default()
    }
}

fn expected(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; OUT_LEN];
    for (i, byte) in out.iter_mut().enumerate() {
        let (row, col) = (i / PITCH, i % PITCH);
        *byte = match col {
            0..8 => a[row * 8 + col],
            8..12 if row < 4 => b[(row + 2) * 8 + col - 8 + 1],
            16.. if row >= 4 => FILL,
            _ => 0,
        };
    }
    out
}

/// A zeroed output of [`OUT_LEN`] bytes on `engine`, and its region.
fn output(engine: &CudaEngine) -> (CudaSlice<u8>, DeviceRegion) {
    let out = engine.alloc(OUT_LEN).unwrap();
    let (ptr, guard) = out.device_ptr(engine.stream());
    drop(guard);
    (out, DeviceRegion { ptr, len: OUT_LEN })
}

fn options(trusted: bool) -> DecodeOptions {
    DecodeOptions::from(1 << 20).with_trusted(trusted)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn decoded_buffers_and_fills_land_at_their_rows() {
    let engine = engine();
    let (a, b, encoded) = chunks();
    let inputs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    for trusted in [false, true] {
        let (_out, dst) = output(&engine);
        // SAFETY: the output is this engine's, alive and unused meanwhile; the rows do not overlap.
        unsafe { engine.decode_scatter(&lz4(), &inputs, &scatter(), dst, options(trusted)) }.unwrap();
        let mut host = vec![0u8; OUT_LEN];
        // SAFETY: the output holds OUT_LEN bytes, and decode_scatter returned after its copies.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut host, dst.ptr) }.unwrap();
        assert_eq!(host, expected(&a, &b), "trusted: {trusted}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wrong_sizes_and_lengths_are_errors() {
    let engine = engine();
    let (_, _, encoded) = chunks();
    let inputs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let (_out, dst) = output(&engine);

    let mut short = scatter();
    short.decoded_lens[1] = 63;
    // SAFETY: as above.
    let err = unsafe { engine.decode_scatter(&lz4(), &inputs, &short, dst, options(false)) }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutputSize {
                index: 1,
                expected: 63,
                actual: 64
            }
        ),
        "{err}"
    );

    // SAFETY: as above.
    let err = unsafe { engine.decode_scatter(&lz4(), &inputs[..1], &scatter(), dst, options(false)) }.unwrap_err();
    assert!(matches!(err, Error::BatchLength { inputs: 1, outputs: 2 }), "{err}");

    let mut one = vec![0u8; 64];
    let err = engine
        .decode_batch_into(&lz4(), &inputs, &mut [one.as_mut_slice()], options(false))
        .unwrap_err();
    assert!(matches!(err, Error::BatchLength { inputs: 2, outputs: 1 }), "{err}");

    // The engine is still usable.
    // SAFETY: as above.
    unsafe { engine.decode_scatter(&lz4(), &inputs, &scatter(), dst, options(false)) }.unwrap();
}

/// Raw DEFLATE of each chunk (as the reader hands zlib streams to the GPU,
/// their header and trailer stripped) and the Adler-32 of each.
fn deflated(chunks: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<u32>) {
    let deflate: Algorithm = "deflate".parse().unwrap();
    let encoded = BatchCodec::new(deflate, Backend::Cpu)
        .unwrap()
        .encode_batch(chunks)
        .unwrap()
        .to_vecs();
    let sums = chunks.iter().map(simd_adler32::adler32).collect();
    (encoded, sums)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn adler32_trailers_are_checked_on_the_device() {
    let engine = engine();
    let (a, b, _) = chunks();
    let (encoded, sums) = deflated(&[&a, &b]);
    let inputs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let deflate: Algorithm = "deflate".parse().unwrap();
    for trusted in [false, true] {
        let (_out, dst) = output(&engine);
        let mut good = scatter();
        good.adler32 = vec![(0, sums[0]), (1, sums[1])];
        // SAFETY: as above.
        unsafe { engine.decode_scatter(&deflate, &inputs, &good, dst, options(trusted)) }.unwrap();
        let mut host = vec![0u8; OUT_LEN];
        // SAFETY: as above.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut host, dst.ptr) }.unwrap();
        assert_eq!(host, expected(&a, &b), "trusted: {trusted}");

        let mut bad = scatter();
        bad.adler32 = vec![(0, sums[0]), (1, sums[1] ^ 1)];
        // SAFETY: as above.
        let err = unsafe { engine.decode_scatter(&deflate, &inputs, &bad, dst, options(trusted)) }.unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { index: 1, reason } if reason.contains("Adler-32 mismatch")),
            "{err}"
        );
    }
    // The engine is still usable after a mismatch.
    let (_out, dst) = output(&engine);
    // SAFETY: as above.
    unsafe {
        engine.decode_scatter(
            &lz4(),
            &chunks().2.iter().map(Vec::as_slice).collect::<Vec<_>>(),
            &scatter(),
            dst,
            options(false),
        )
    }
    .unwrap();
}
