//! LZ4: numcodecs' `LZ4` layout (4-byte little-endian decoded length, then one
//! LZ4 block), or the bare block (`has_header: false`), through `lz4_flex`'s
//! block API, whose blocks are the C library's.

use std::ffi::{c_char, c_int};

use super::{DecodeResult, Fill};
use crate::error::{Error, Result};
use crate::format;

/// Largest input the C LZ4 library (`LZ4_MAX_INPUT_SIZE`) compresses or
/// decompresses; larger blocks would not be readable by numcodecs or nvCOMP.
pub(crate) const MAX_INPUT_SIZE: usize = 0x7E00_0000;

/// Encodes one buffer, with the numcodecs length header when `header`.
pub(crate) fn encode(input: &[u8], header: bool, index: usize) -> Result<Vec<u8>> {
    if input.len() > MAX_INPUT_SIZE {
        return Err(Error::InputTooLarge {
            index,
            size: input.len() as u64,
            limit: MAX_INPUT_SIZE as u64,
            algorithm: "lz4",
        });
    }
    let prefix = if header { format::lz4::HEADER_LEN } else { 0 };
    let mut out = vec![0u8; prefix + lz4_flex::block::get_maximum_output_size(input.len())];
    if header {
        // Cannot fail: the length is below MAX_INPUT_SIZE.
        let bytes = format::lz4::write_header(input.len()).map_err(|reason| Error::Encode { index, reason })?;
        out[..prefix].copy_from_slice(&bytes);
    }
    let n = lz4_flex::block::compress_into(input, &mut out[prefix..]).map_err(|e| Error::Encode {
        index,
        reason: format!("LZ4 compression failed: {e}"),
    })?;
    out.truncate(prefix + n);
    Ok(out)
}

/// The decoded length the numcodecs header declares.
pub(crate) fn declared_len(input: &[u8]) -> DecodeResult<u64> {
    format::lz4::split_header(input).map(|(len, _)| len as u64)
}

/// The most an LZ4 block of `encoded_len` bytes decodes to: every sequence
/// costs at least 3 bytes and each further length byte adds at most 255.
pub(crate) fn max_decoded_len(encoded_len: u64) -> u64 {
    encoded_len.saturating_mul(255).saturating_add(64)
}

/// Decodes into `out`: exactly the declared size with `header`, any capacity without.
pub(crate) fn decode_to(input: &[u8], out: &mut [u8], header: bool) -> DecodeResult<Fill> {
    let block = if header {
        format::lz4::split_header(input)?.1
    } else {
        input
    };
    if block.is_empty() {
        // lz4_flex rejects an empty block; C LZ4 and nvCOMP write none for
        // empty buffers, so an empty block is zero bytes, and only that.
        return if header && !out.is_empty() {
            Err("empty LZ4 block for a non-empty buffer".into())
        } else {
            Ok(Fill::Done(0))
        };
    }
    if let Some(n) = decode_c(block, out) {
        return Ok(Fill::Done(n));
    }
    // The C decoder does not say why it stopped: too small an output, or a
    // malformed block. lz4_flex does, and is bounds-checked as well.
    match lz4_flex::block::decompress_into(block, out) {
        Ok(n) => Ok(Fill::Done(n)),
        Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) => Ok(Fill::NeedsMore),
        Err(e) => Err(format!("bad LZ4 block: {e}")),
    }
}

/// Decodes `block` into `out` with the C library: the decoded length, or
/// `None` when the block is malformed or does not fit. Outputs beyond the C
/// API's `int` range are offered only that much of their capacity.
fn decode_c(block: &[u8], out: &mut [u8]) -> Option<usize> {
    let src_len = c_int::try_from(block.len()).ok()?;
    let capacity = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
    // SAFETY: LZ4_decompress_safe reads at most `src_len` bytes of `block`
    // and writes at most `capacity` (<= out.len()) bytes of `out`, whatever
    // the block holds; the two slices cannot overlap (`out` is exclusive).
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            block.as_ptr().cast::<c_char>(),
            out.as_mut_ptr().cast::<c_char>(),
            src_len,
            capacity,
        )
    };
    usize::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_numcodecs_layout() {
        let data = b"abcabcabcabcabcabcabcabc".repeat(10);
        let enc = encode(&data, true, 0).unwrap();
        assert_eq!(&enc[..4], &(data.len() as u32).to_le_bytes());
        assert_eq!(lz4_flex::block::decompress(&enc[4..], data.len()).unwrap(), data);
        let bare = encode(&data, false, 0).unwrap();
        assert_eq!(bare, enc[4..]);
    }

    #[test]
    fn small_output_asks_for_more() {
        let data = vec![3u8; 10_000];
        let bare = encode(&data, false, 0).unwrap();
        assert_eq!(decode_to(&bare, &mut [0u8; 100], false), Ok(Fill::NeedsMore));
        let mut out = vec![0u8; 20_000];
        assert_eq!(decode_to(&bare, &mut out, false), Ok(Fill::Done(10_000)));
    }
}
