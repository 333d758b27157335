//! Raw DEFLATE (RFC 1951) and zlib streams (RFC 1950).
//!
//! A raw DEFLATE stream has no framing: it declares no size, and its end is
//! found only by decoding it. A zlib stream wraps one:
//!
//! ```text
//! offset  bytes  field
//! 0       1      CMF: bits 3-0 method (8 = deflate), bits 7-4 window size
//! 1       1      FLG: bit 5 preset dictionary; CMF * 256 + FLG is a multiple of 31
//! 2       ...    raw DEFLATE stream
//! len-4   4      Adler-32 of the decoded data, u32 big endian
//! ```
//!
//! Streams with a preset dictionary (FDICT) are not read: the dictionary
//! would be needed to decode them.
//!
//! [`check_stream`] inflates a raw DEFLATE stream on the host, keeping only
//! a window of its output: nvCOMP's decoder checks neither that a match's
//! distance lies within the bytes decoded so far nor that every code is one
//! DEFLATE defines (literal/length codes 286 and 287, distance codes 30 and
//! 31), and an H200 fuzz run found such codes anywhere in a stream, not only
//! in its first 32 KiB of output. Only a whole decode finds them. Untrusted
//! streams are walked so on the device (`crate::cuda::gate::inflate`); this
//! is the host's walk of those it cannot place and those it refuses, which
//! words their errors as the CPU backend does.

use std::cell::RefCell;

use flate2::{Decompress, FlushDecompress, Status};

/// Bytes of a zlib header (CMF, FLG).
pub(crate) const ZLIB_HEADER_LEN: usize = 2;

/// The zlib header written in front of raw DEFLATE streams: deflate, 32
/// KiB window, no dictionary, "fastest" level (the level is informational).
pub(crate) const ZLIB_HEADER: [u8; ZLIB_HEADER_LEN] = [0x78, 0x01];

/// Bytes of a zlib trailer (Adler-32).
pub(crate) const ZLIB_TRAILER_LEN: usize = 4;

/// Checks the zlib header at the start of `stream`: deflate, no preset
/// dictionary, a valid check value.
pub(crate) fn check_zlib_header(stream: &[u8]) -> Result<(), String> {
    match stream {
        [cmf, flg, ..] if cmf & 0x0f == 8 && flg & 0x20 == 0 && u16::from_be_bytes([*cmf, *flg]) % 31 == 0 => Ok(()),
        _ => Err("not a zlib stream (bad header, or a preset dictionary)".into()),
    }
}

/// The Adler-32 a zlib stream declares in its trailer, `None` when it is
/// shorter than the trailer.
pub(crate) fn zlib_adler32(stream: &[u8]) -> Option<u32> {
    stream.last_chunk::<ZLIB_TRAILER_LEN>().map(|t| u32::from_be_bytes(*t))
}

/// Bytes of output the check decodes into at a time: the largest distance
/// DEFLATE can encode, which the inflate state keeps itself.
pub(crate) const WINDOW: usize = 32 * 1024;

thread_local! {
    // The inflate state and the window-sized output are reused between
    // streams, so that a check costs no allocation and memory stays bounded
    // however large the stream's output.
    static STREAM_CHECK: RefCell<(Decompress, Box<[u8]>)> =
        RefCell::new((Decompress::new(false), vec![0; WINDOW].into_boxed_slice()));
}

/// Inflates the raw DEFLATE stream `stream` with the CPU backend's decoder
/// (`flate2` on zlib-rs), [`WINDOW`] bytes of output at a time, each
/// overwriting the last, and returns its error, worded as the CPU backend
/// words it, where the stream is invalid: a distance too far back, a bad
/// block or code, or input that ends before the stream does. It accepts
/// exactly the streams the CPU backend decodes. Returns the number of bytes
/// of `stream` the DEFLATE stream takes (what follows it is not read).
pub(crate) fn check_stream(stream: &[u8]) -> Result<usize, String> {
    STREAM_CHECK.with(|cell| {
        let mut state = cell.borrow_mut();
        let (d, out) = &mut *state;
        d.reset(false);
        loop {
            let (used_in, used_out) = (d.total_in(), d.total_out());
            let status = d
                .decompress(&stream[used_in as usize..], out, FlushDecompress::Finish)
                .map_err(|e| format!("bad deflate data: {e}"))?;
            let progress = d.total_in() > used_in || d.total_out() > used_out;
            match status {
                Status::StreamEnd => return Ok(d.total_in() as usize),
                _ if !progress => return Err("truncated deflate stream".into()),
                _ => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zlib_header_and_trailer_are_read() {
        let data = b"hello zlib";
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut enc, data).unwrap();
        let stream = enc.finish().unwrap();
        assert_eq!(check_zlib_header(&stream), Ok(()));
        assert_eq!(zlib_adler32(&stream), Some(simd_adler32::adler32(&&data[..])));
        // A preset dictionary, a broken check value, another method.
        assert!(check_zlib_header(&[0x78, 0xbb]).is_err());
        assert!(check_zlib_header(&[0x78, 0x9d]).is_err());
        assert!(check_zlib_header(&[0x77, 0x9c]).is_err());
        assert!(check_zlib_header(&stream[..1]).is_err());
        assert_eq!(zlib_adler32(&stream[..3]), None);
    }

    /// Float32 field data as the benches and the GPU tests use: a random
    /// walk rounded to two decimals.
    fn field(bytes: usize, seed: u64) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut walk = 0f32;
        (0..bytes.div_ceil(4))
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                walk += (state % 2001) as f32 / 1000.0 - 1.0;
                ((walk * 100.0).round() / 100.0).to_le_bytes()
            })
            .take(bytes)
            .collect()
    }

    fn flate2_raw(data: &[u8], level: u32) -> Vec<u8> {
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
        std::io::Write::write_all(&mut enc, data).unwrap();
        enc.finish().unwrap()
    }

    /// The CPU backend's verdict on a whole stream: flate2 on zlib-rs, as
    /// `cpu::deflate` runs it.
    fn cpu_accepts(stream: &[u8]) -> bool {
        let mut d = Decompress::new(false);
        let mut out = vec![0u8; 4 << 20];
        matches!(
            d.decompress(stream, &mut out, FlushDecompress::Finish),
            Ok(Status::StreamEnd)
        )
    }

    #[test]
    fn the_corpus_streams_the_gpu_accepted_are_rejected_as_the_cpu_rejects_them() {
        let cases = super::super::gpu_corpus("deflate");
        assert_eq!(cases.len(), 8, "the corpus's raw DEFLATE cases");
        for (name, batch, valid) in cases {
            for (i, stream) in batch.iter().enumerate() {
                assert_eq!(check_stream(stream).is_ok(), cpu_accepts(stream), "{name}, buffer {i}");
            }
            // Buffer 1 is the mutated one in each case.
            let err = check_stream(&batch[1]).unwrap_err();
            assert!(err.starts_with("bad deflate data: "), "{name}: {err}");
            for stream in &valid {
                assert_eq!(check_stream(stream), Ok(stream.len()), "{name}");
            }
        }
    }

    #[test]
    fn valid_streams_of_every_level_and_size_pass() {
        let sizes = [0, 1, 100, 4095, WINDOW - 1, WINDOW, WINDOW + 1, 65536, 200_000, 1 << 20];
        for (s, &size) in sizes.iter().enumerate() {
            let mut samples = vec![field(size, s as u64)];
            // Runs of one byte (long matches) and noisier bytes, below 1 MiB.
            if size < 1 << 20 {
                samples.push(vec![7u8; size]);
                samples.push(field(size, 99).iter().map(|b| b ^ 0x3c).collect());
            }
            for data in &samples {
                for level in 0..=9 {
                    let stream = flate2_raw(data, level);
                    assert_eq!(
                        check_stream(&stream),
                        Ok(stream.len()),
                        "flate2 level {level}, {size} bytes"
                    );
                }
                for level in 0..=10 {
                    let stream = miniz_oxide::deflate::compress_to_vec(data, level);
                    assert_eq!(
                        check_stream(&stream),
                        Ok(stream.len()),
                        "miniz_oxide level {level}, {size} bytes"
                    );
                }
            }
        }
    }

    #[test]
    fn streams_are_rejected_exactly_when_the_cpu_rejects_them() {
        // Bit flips, truncations and distance edits all over valid streams,
        // far beyond the first window of output too.
        let mut rejected = 0;
        for (s, size) in [1000usize, 20_000, 70_000].into_iter().enumerate() {
            let data = field(size, s as u64 + 10);
            let stream = flate2_raw(&data, 6);
            for k in 0..400 {
                let mut bad = stream.clone();
                let at = (k * 7919 + s * 31) % bad.len();
                bad[at] ^= 1 << (k % 8);
                if k % 5 == 0 {
                    bad.truncate(at.max(1));
                }
                let accepted = check_stream(&bad).is_ok();
                assert_eq!(accepted, cpu_accepts(&bad), "size {size}, case {k}");
                rejected += usize::from(!accepted);
            }
        }
        assert!(rejected > 100, "only {rejected} mutated streams rejected");
        assert_eq!(check_stream(&[]), Err("truncated deflate stream".into()));
    }
}
