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

/// The decoded length the last gzip member declares (ISIZE, the length
/// modulo 4 GiB): a hint for the first allocation, not the stream's size,
/// since RFC 1952 lets a stream hold several members (as bgzip writes).
pub(crate) fn gzip_size_hint(input: &[u8]) -> DecodeResult<u64> {
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
    let mut out = Vec::new();
    inflate_appending(input, &mut out, first, bound)?;
    // flate2 zeroes the spare capacity it offers: give it back.
    out.shrink_to_fit();
    Ok(out)
}

/// [`inflate_growing`] appending to `out`; returns the number of input
/// bytes the stream used.
fn inflate_appending(
    input: &[u8],
    out: &mut Vec<u8>,
    first: usize,
    bound: usize,
) -> std::result::Result<usize, GrowError> {
    INFLATE.with(|d| {
        let mut d = d.borrow_mut();
        d.reset(false);
        loop {
            if out.len() == out.capacity() {
                super::grow(out, first, bound)?;
            }
            let used = d.total_in() as usize;
            let status = d
                .decompress_vec(&input[used..], out, FlushDecompress::Finish)
                .map_err(|e| GrowError::Corrupt(format!("bad deflate data: {e}")))?;
            match status {
                Status::StreamEnd => return Ok(d.total_in() as usize),
                // Stopped with room left: the input ran out.
                _ if out.len() < out.capacity() => return Err(GrowError::Corrupt("truncated deflate stream".into())),
                _ => {}
            }
        }
    })
}

/// Checks the trailer that follows a member's deflate stream (at `at` in
/// `member`) against the CRC32 and length of the member's output; returns
/// the bytes after the trailer (the next member, if any).
fn member_trailer(member: &[u8], at: usize, crc32: u32, len: u64) -> DecodeResult<&[u8]> {
    let stored = member
        .get(at..)
        .and_then(<[u8]>::first_chunk::<{ gzip::TRAILER_LEN }>)
        .map(Trailer::from_bytes)
        .ok_or("gzip member ends before its trailer")?;
    if stored.crc32 != crc32 {
        return Err("gzip CRC32 mismatch".into());
    }
    if u64::from(stored.isize) != len % (1 << 32) {
        return Err(format!(
            "a gzip member decodes to {len} bytes, but its trailer's ISIZE (the length modulo 4 GiB) is {}",
            stored.isize
        ));
    }
    Ok(&member[at + gzip::TRAILER_LEN..])
}

/// [`member_trailer`] for a member whose output is `decoded`.
fn checked_member<'a>(member: &'a [u8], at: usize, decoded: &[u8]) -> DecodeResult<&'a [u8]> {
    member_trailer(member, at, Trailer::of(decoded).crc32, decoded.len() as u64)
}

/// Bytes of output [`gzip_decoded_len`] decodes into at a time.
const COUNT_WINDOW: usize = 64 * 1024;

/// The length a gzip stream of one or more members decodes to, each
/// member's CRC32 and ISIZE checked, decoded [`COUNT_WINDOW`] bytes at a
/// time into the same buffer: a stream that does not fit where it goes is
/// measured for its error without holding its output (a bomb costs time,
/// not memory). [`GrowError::Full`] past `bound` bytes.
pub(crate) fn gzip_decoded_len(input: &[u8], bound: u64) -> std::result::Result<u64, GrowError> {
    let corrupt = GrowError::Corrupt;
    let mut window = vec![0u8; COUNT_WINDOW];
    let mut total = 0u64;
    let mut rest = input;
    INFLATE.with(|d| {
        let mut d = d.borrow_mut();
        loop {
            let start = gzip::header_len(rest).map_err(corrupt)?;
            let body = &rest[start..];
            d.reset(false);
            let mut crc = flate2::Crc::new();
            loop {
                let (used_in, used_out) = (d.total_in(), d.total_out());
                let status = d
                    .decompress(&body[used_in as usize..], &mut window, FlushDecompress::Finish)
                    .map_err(|e| corrupt(format!("bad deflate data: {e}")))?;
                let produced = (d.total_out() - used_out) as usize;
                crc.update(&window[..produced]);
                total += produced as u64;
                if total > bound {
                    return Err(GrowError::Full);
                }
                match status {
                    Status::StreamEnd => break,
                    _ if d.total_in() == used_in && produced == 0 => {
                        return Err(corrupt("truncated deflate stream".into()))
                    }
                    _ => {}
                }
            }
            rest = member_trailer(body, d.total_in() as usize, crc.sum(), d.total_out()).map_err(corrupt)?;
            if rest.is_empty() {
                return Ok(total);
            }
        }
    })
}

/// Decodes a gzip stream of one or more members (RFC 1952, 2.2) into a
/// buffer that grows from `first` bytes (the last member's ISIZE is a good
/// guess), never past `bound`, checking each member's CRC32 and ISIZE.
pub(crate) fn gzip_growing(input: &[u8], first: usize, bound: usize) -> std::result::Result<Vec<u8>, GrowError> {
    let mut out = Vec::new();
    let mut rest = input;
    loop {
        let start = gzip::header_len(rest).map_err(GrowError::Corrupt)?;
        let before = out.len();
        let used = inflate_appending(&rest[start..], &mut out, first, bound)?;
        rest = checked_member(&rest[start..], used, &out[before..]).map_err(GrowError::Corrupt)?;
        if rest.is_empty() {
            out.shrink_to_fit();
            return Ok(out);
        }
    }
}

/// Decodes a raw deflate stream into `out` (any capacity).
pub(crate) fn deflate_decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    inflate(input, out).map(|(fill, _)| fill)
}

/// Decodes a gzip stream of one or more members into `out` (any capacity),
/// checking each member's CRC32 and ISIZE; [`Fill::NeedsMore`] when `out`
/// cannot hold it all.
pub(crate) fn gzip_decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    let (mut rest, mut filled) = (input, 0);
    loop {
        let start = gzip::header_len(rest)?;
        let (fill, used) = inflate(&rest[start..], &mut out[filled..])?;
        let Fill::Done(n) = fill else { return Ok(fill) };
        rest = checked_member(&rest[start..], used, &out[filled..filled + n])?;
        filled += n;
        if rest.is_empty() {
            return Ok(Fill::Done(filled));
        }
    }
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
    fn multi_member_gzip_decodes_whole() {
        // Two members, as `cat a.gz b.gz` or bgzip write them.
        let (a, b) = (b"first member ".repeat(100), b"second, longer member ".repeat(150));
        let mut two = gzip_encode(&a, 6, 0).unwrap();
        two.extend_from_slice(&gzip_encode(&b, 1, 0).unwrap());
        let whole = [a.as_slice(), b.as_slice()].concat();
        let mut out = vec![0; whole.len()];
        assert_eq!(gzip_decode_to(&two, &mut out), Ok(Fill::Done(whole.len())));
        assert_eq!(out, whole);
        // The last member's ISIZE is a wrong size for the whole: more is needed.
        assert_eq!(gzip_decode_to(&two, &mut vec![0; b.len()]), Ok(Fill::NeedsMore));
        assert_eq!(gzip_growing(&two, b.len(), 1 << 20).unwrap(), whole);
        assert_eq!(gzip_growing(&two, 1, whole.len() + 1).unwrap(), whole);
        assert_eq!(gzip_growing(&two, 1, whole.len() - 1), Err(GrowError::Full));
        // Measured without being held, as for the error of a stream too large for its output.
        assert_eq!(gzip_decoded_len(&two, 1 << 20), Ok(whole.len() as u64));
        assert_eq!(gzip_decoded_len(&two, whole.len() as u64 - 1), Err(GrowError::Full));
        let long = gzip_encode(&vec![3u8; 5 * COUNT_WINDOW + 7], 1, 0).unwrap();
        assert_eq!(gzip_decoded_len(&long, 1 << 30), Ok(5 * COUNT_WINDOW as u64 + 7));
        assert!(matches!(
            gzip_decoded_len(&long[..long.len() / 2], 1 << 30),
            Err(GrowError::Corrupt(_))
        ));
        // An empty member after the data, and one at the start.
        let empty = gzip_encode(&[], 6, 0).unwrap();
        let padded = [empty.as_slice(), &two, &empty].concat();
        assert_eq!(gzip_decode_to(&padded, &mut out), Ok(Fill::Done(whole.len())));
        assert_eq!(gzip_growing(&padded, 16, 1 << 20).unwrap(), whole);
        // Each member's trailer is checked; bytes after the last member are not a member.
        let mut bad = two.clone();
        let first_crc = gzip_encode(&a, 6, 0).unwrap().len() - gzip::TRAILER_LEN;
        bad[first_crc] ^= 1;
        assert!(gzip_decode_to(&bad, &mut out).unwrap_err().contains("CRC32"));
        assert!(matches!(gzip_growing(&bad, 1, 1 << 20), Err(GrowError::Corrupt(_))));
        assert!(matches!(gzip_decoded_len(&bad, 1 << 20), Err(GrowError::Corrupt(_))));
        let trailing = [two.as_slice(), b"junk that is no member"].concat();
        assert!(gzip_decode_to(&trailing, &mut out).is_err());
        assert!(gzip_decode_to(&two[..two.len() - 3], &mut out).is_err());
    }

    #[test]
    fn a_wrong_isize_says_it_is_the_length_modulo_4_gib() {
        let data = vec![5u8; 10_000];
        let mut enc = gzip_encode(&data, 6, 0).unwrap();
        let n = enc.len();
        // The trailer of a member of 4 GiB + 10000 bytes.
        enc[n - 4..].copy_from_slice(&0u32.to_le_bytes());
        let err = gzip_decode_to(&enc, &mut vec![0; data.len()]).unwrap_err();
        assert!(
            err.contains("decodes to 10000 bytes") && err.contains("modulo 4 GiB"),
            "{err}"
        );
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
