//! The host cost of the check untrusted raw DEFLATE streams get before the
//! GPU decodes them: each stream inflated up to its first 32 KiB of output
//! (see `cuda::chunking::check_deflate_windows`), against the whole
//! inflate the CPU backend does. float32 field data at zlib level 1 and 6,
//! 1 MiB and 64 KiB streams, 64 MiB in all; per stream on one thread, and
//! per batch on every thread of rayon's pool (best of 5).
//!
//! `cargo bench --bench deflate_window`

use std::time::Instant;

use flate2::{Compression, Decompress, FlushDecompress};
use rayon::prelude::*;

#[path = "common/data.rs"]
mod data;

const TOTAL: usize = 64 << 20;
const WINDOW: usize = 32 << 10;

/// Inflates `stream` into `out` as far as `out` holds, as the check does
/// with a 32 KiB `out`.
fn inflate_into(d: &mut Decompress, stream: &[u8], out: &mut [u8]) {
    d.reset(false);
    d.decompress(stream, out, FlushDecompress::Finish)
        .expect("a valid stream");
}

/// Best seconds of five runs of `f`.
fn best_secs(mut f: impl FnMut()) -> f64 {
    f();
    (0..5)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let field = data::field_f32(TOTAL);
    println!(
        "{} MiB field_f32, {} threads",
        TOTAL >> 20,
        rayon::current_num_threads()
    );
    for level in [1, 6] {
        for chunk in [1 << 20, 64 << 10] {
            let streams: Vec<Vec<u8>> = field
                .par_chunks(chunk)
                .map(|c| {
                    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), Compression::new(level));
                    std::io::Write::write_all(&mut enc, c).unwrap();
                    enc.finish().unwrap()
                })
                .collect();
            let n = streams.len();
            let mut d = Decompress::new(false);
            let mut out = vec![0u8; chunk];
            let per_stream = |len: usize, d: &mut Decompress, out: &mut [u8]| {
                best_secs(|| streams.iter().for_each(|s| inflate_into(d, s, &mut out[..len]))) / n as f64
            };
            let window = per_stream(WINDOW.min(chunk), &mut d, &mut out);
            let whole = per_stream(chunk, &mut d, &mut out);
            let batch = best_secs(|| {
                streams.par_iter().for_each_init(
                    || (Decompress::new(false), vec![0u8; WINDOW]),
                    |(d, out), s| inflate_into(d, s, out),
                );
            });
            println!(
                "level {level}, {n} streams of {} KiB: check {:.1} us/stream ({:.0}% of a whole inflate, {:.1} us), \
                 batch of {n} on {} threads {:.2} ms ({:.1} GB/s of decoded data)",
                chunk >> 10,
                window * 1e6,
                100.0 * window / whole,
                whole * 1e6,
                rayon::current_num_threads(),
                batch * 1e3,
                TOTAL as f64 / batch / 1e9,
            );
        }
    }
}
