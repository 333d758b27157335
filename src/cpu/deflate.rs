//! Raw DEFLATE (RFC 1951) and gzip members (RFC 1952), through `flate2` on
//! its zlib-rs backend.
//!
//! Why not libdeflate: `libdeflate-sys` and `gdeflate-sys` both define
//! `libdeflate_aligned_malloc`, `libdeflate_aligned_free` and
//! `libdeflate_set_memory_allocator` with different signatures, so no binary
//! can link both; GDeflate needs the latter.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::{DecodeResult, Fill, GrowError};
use crate::error::{Error, Result};
use crate::format::gzip::{self, Trailer};
use crate::format::BufferEnds;

thread_local! {
    // Inflate state and window are reused between buffers on a thread.
    static INFLATE: RefCell<Decompress> = RefCell::new(Decompress::new(false));
}

/// Appends the raw deflate stream of `input` at zlib level `level` to `out`.
fn deflate_into(input: &[u8], level: i32, out: &mut Vec<u8>, index: usize) -> Result<()> {
    let mut c = Compress::new(Compression::new(level.clamp(0, 9) as u32), false);
    // zlib's deflateBound for raw streams, plus slack: one pass nearly always.
    out.reserve(input.len() + input.len() / 1000 + 64);
    loop {
        let consumed = c.total_in() as usize;
        let status = c
            .compress_vec(&input[consumed..], out, FlushCompress::Finish)
            .map_err(|e| Error::Encode {
                index,
                reason: format!("deflate compression failed: {e}"),
            })?;
        if status == Status::StreamEnd {
            return Ok(());
        }
        out.reserve(out.capacity().max(64));
    }
}

/// Encodes one buffer as a raw deflate stream at zlib level `level`.
pub(crate) fn deflate_encode(input: &[u8], level: i32, index: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    deflate_into(input, level, &mut out, index)?;
    Ok(out)
}

/// Encodes one buffer as one gzip member at zlib level `level`.
pub(crate) fn gzip_encode(input: &[u8], level: i32, index: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() + input.len() / 1000 + 64 + gzip::MIN_LEN);
    out.extend_from_slice(&gzip::HEADER);
    deflate_into(input, level, &mut out, index)?;
    out.extend_from_slice(&Trailer::of(input).to_bytes());
    Ok(out)
}

/// The decoded length a gzip member declares (ISIZE, exact below 4 GiB).
pub(crate) fn gzip_declared_len(input: &[u8]) -> DecodeResult<u64> {
    gzip::trailer(BufferEnds::of(input)).map(|t| u64::from(t.isize))
}

/// The most a deflate stream of `encoded_len` bytes decodes to: a 258-byte
/// match costs at least 2 bits, hence deflate's 1032:1 ceiling.
pub(crate) fn max_decoded_len(encoded_len: u64) -> u64 {
    encoded_len.saturating_mul(1032).saturating_add(1032)
}

/// Inflates a raw deflate stream into `out`; returns the fill and the
/// number of input bytes the stream used.
fn inflate(input: &[u8], out: &mut [u8]) -> DecodeResult<(Fill, usize)> {
    INFLATE.with(|d| {
        let mut d = d.borrow_mut();
        d.reset(false);
        let status = d
            .decompress(input, out, FlushDecompress::Finish)
            .map_err(|e| format!("bad deflate data: {e}"));
        let (used_in, used_out) = (d.total_in() as usize, d.total_out() as usize);
        match status? {
            Status::StreamEnd => Ok((Fill::Done(used_out), used_in)),
            // Output full before the end: a larger buffer may hold it.
            _ if used_out == out.len() => Ok((Fill::NeedsMore, used_in)),
            _ => Err("truncated deflate stream".into()),
        }
    })
}

/// Inflates a raw deflate stream into a buffer that grows as it fills, from
/// `first` bytes, never past `bound` ([`GrowError::Full`] when the stream
/// needs more): the decoder resumes where it stopped, nothing is decoded twice.
pub(crate) fn inflate_growing(input: &[u8], first: usize, bound: usize) -> std::result::Result<Vec<u8>, GrowError> {
    INFLATE.with(|d| {
        let mut d = d.borrow_mut();
        d.reset(false);
        let mut out = Vec::new();
        loop {
            if out.len() == out.capacity() {
                super::grow(&mut out, first, bound)?;
            }
            let used = d.total_in() as usize;
            let status = d
                .decompress_vec(&input[used..], &mut out, FlushDecompress::Finish)
                .map_err(|e| GrowError::Corrupt(format!("bad deflate data: {e}")))?;
            match status {
                Status::StreamEnd => {
                    // flate2 zeroes the spare capacity it offers: give it back.
                    out.shrink_to_fit();
                    return Ok(out);
                }
                // Stopped with room left: the input ran out.
                _ if out.len() < out.capacity() => return Err(GrowError::Corrupt("truncated deflate stream".into())),
                _ => {}
            }
        }
    })
}

/// Decodes a raw deflate stream into `out` (any capacity).
pub(crate) fn deflate_decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    inflate(input, out).map(|(fill, _)| fill)
}

/// Decodes a gzip member into `out`, which has the size ISIZE declares, and
/// checks its CRC32 and ISIZE.
pub(crate) fn gzip_decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    let start = gzip::header_len(input)?;
    let end = input.len() - gzip::TRAILER_LEN;
    let (fill, used) = inflate(&input[start..end], out)?;
    let Fill::Done(n) = fill else { return Ok(fill) };
    if used != end - start {
        return Err(format!(
            "{} bytes between the deflate stream and the gzip trailer",
            end - start - used
        ));
    }
    let stored = gzip::trailer(BufferEnds::of(input))?;
    let computed = Trailer::of(&out[..n]);
    if stored.crc32 != computed.crc32 {
        return Err("gzip CRC32 mismatch".into());
    }
    if stored.isize != computed.isize {
        return Err("gzip ISIZE does not match the decoded length".into());
    }
    Ok(Fill::Done(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_checks_crc_and_header_fields() {
        let data = b"gzip gzip gzip gzip".repeat(50);
        let enc = gzip_encode(&data, 6, 0).unwrap();
        let mut out = vec![0; data.len()];
        assert_eq!(gzip_decode_to(&enc, &mut out), Ok(Fill::Done(data.len())));
        assert_eq!(out, data);
        let mut bad_crc = enc.clone();
        let at = bad_crc.len() - 8;
        bad_crc[at] ^= 1;
        assert!(gzip_decode_to(&bad_crc, &mut out).is_err());
        // A member with FNAME set, as gzip(1) writes it.
        let mut named = enc[..10].to_vec();
        named[3] = 8;
        named.extend_from_slice(b"file.bin\0");
        named.extend_from_slice(&enc[10..]);
        assert_eq!(gzip_decode_to(&named, &mut out), Ok(Fill::Done(data.len())));
        assert!(gzip_decode_to(&named[..15], &mut out).is_err());
    }

    #[test]
    fn deflate_asks_for_more_and_detects_truncation() {
        let data = vec![9u8; 100_000];
        let enc = deflate_encode(&data, 1, 0).unwrap();
        assert_eq!(deflate_decode_to(&enc, &mut [0; 100]), Ok(Fill::NeedsMore));
        let mut out = vec![0; 200_000];
        assert_eq!(deflate_decode_to(&enc, &mut out), Ok(Fill::Done(100_000)));
        assert!(deflate_decode_to(&enc[..enc.len() / 2], &mut out).is_err());
        // Growing: from a small start, resumed, never decoded twice.
        assert_eq!(inflate_growing(&enc, 1000, 200_000).unwrap(), data);
        assert_eq!(inflate_growing(&enc, 1000, 100_001).unwrap(), data);
        assert_eq!(inflate_growing(&enc, 1000, 99_999), Err(GrowError::Full));
        assert!(matches!(
            inflate_growing(&enc[..enc.len() / 2], 1000, 200_000),
            Err(GrowError::Corrupt(_))
        ));
    }
}
