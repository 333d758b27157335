//! BatchCodec CPU decode against a single-threaded reference loop, on 256 MiB
//! of float32-like data in 1 MiB chunks; prints GB/s (best of 3) and ratios.
//!
//! `cargo bench --bench cpu_decode`

use std::hint::black_box;
use std::time::Instant;

use zarrs_nvcomp::{Backend, BatchCodec};

#[path = "common/data.rs"]
mod data;

const TOTAL: usize = 256 << 20;
const CHUNK: usize = 1 << 20;

/// Best GB/s of three runs of `f` over `TOTAL` decoded bytes.
fn best_gbps(mut f: impl FnMut()) -> f64 {
    f(); // warm-up: thread pool, contexts, page cache
    (0..3)
        .map(|_| {
            let start = Instant::now();
            f();
            TOTAL as f64 / start.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

fn main() {
    let field = data::field_f32(TOTAL);
    let chunks: Vec<&[u8]> = field.chunks(CHUNK).collect();
    println!(
        "{} MiB field_f32, {} chunks of {} KiB, {} threads",
        TOTAL >> 20,
        chunks.len(),
        CHUNK >> 10,
        rayon::current_num_threads()
    );
    for name in ["lz4", "zstd"] {
        let codec = BatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap();
        let encoded = codec.encode_batch(&chunks).unwrap();
        let encoded: Vec<&[u8]> = encoded.iter().collect();
        let ratio = TOTAL as f64 / encoded.iter().map(|b| b.len()).sum::<usize>() as f64;
        let batch = best_gbps(|| {
            black_box(codec.decode_batch(&encoded).unwrap());
        });
        // The storage of the previous result reused, as the Python package does.
        let mut storage = Vec::new();
        let recycled = best_gbps(|| {
            let batch = codec
                .decode_batch_in(&encoded, |_| std::mem::take(&mut storage))
                .unwrap();
            storage = black_box(batch).into_parts().0;
        });
        let mut outs: Vec<Vec<u8>> = chunks.iter().map(|c| vec![0; c.len()]).collect();
        let into = best_gbps(|| {
            let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
            codec.decode_batch_into(&encoded, &mut refs).unwrap();
        });
        // The reference: one thread, each chunk decoded into a fresh vector,
        // as numcodecs does.
        let reference = best_gbps(|| match name {
            "lz4" => encoded.iter().for_each(|b| {
                // numcodecs' framing: u32 LE decoded length, then the block.
                let (size, block) = (u32::from_le_bytes(b[..4].try_into().unwrap()) as usize, &b[4..]);
                // C liblz4 into a fresh, uninitialised vector, as numcodecs' LZ4 does.
                let mut out = Vec::<u8>::with_capacity(size);
                // SAFETY: the C decoder writes at most `size` bytes, the
                // capacity, and the length is set to what it wrote.
                unsafe {
                    let n = lz4_sys::LZ4_decompress_safe(
                        block.as_ptr().cast(),
                        out.as_mut_ptr().cast(),
                        block.len() as i32,
                        size as i32,
                    );
                    assert_eq!(n as usize, size);
                    out.set_len(size);
                }
                black_box(out);
            }),
            _ => encoded.iter().for_each(|b| {
                black_box(zstd::bulk::decompress(b, CHUNK).unwrap());
            }),
        });
        println!(
            "{name:5} ratio {ratio:.2}: decode_batch {batch:.2} GB/s ({:.2}x), decode_batch_in (reused) {recycled:.2} GB/s \
             ({:.2}x), decode_batch_into {into:.2} GB/s ({:.2}x), reference 1 thread {reference:.2} GB/s",
            batch / reference,
            recycled / reference,
            into / reference
        );
    }
}
