//! Raw Snappy (not the framed format) through the `snap` crate.

use std::cell::RefCell;

use super::{DecodeResult, Fill};
use crate::error::{Error, Result};
use crate::format;

thread_local! {
    // The encoder keeps its hash table between calls; one per thread.
    static ENCODER: RefCell<snap::raw::Encoder> = RefCell::new(snap::raw::Encoder::new());
}

/// Largest input raw Snappy can hold (its preamble is a 32-bit length).
pub(crate) const MAX_INPUT_SIZE: usize = u32::MAX as usize;

/// Encodes one buffer.
pub(crate) fn encode(input: &[u8], index: usize) -> Result<Vec<u8>> {
    if input.len() > MAX_INPUT_SIZE {
        return Err(Error::InputTooLarge {
            index,
            size: input.len() as u64,
            limit: MAX_INPUT_SIZE as u64,
            algorithm: "snappy",
        });
    }
    let mut out = vec![0u8; snap::raw::max_compress_len(input.len())];
    let n = ENCODER
        .with(|e| e.borrow_mut().compress(input, &mut out))
        .map_err(|e| Error::Encode {
            index,
            reason: format!("Snappy compression failed: {e}"),
        })?;
    out.truncate(n);
    Ok(out)
}

/// The decoded length in the varint preamble.
pub(crate) fn declared_len(input: &[u8]) -> DecodeResult<u64> {
    format::snappy::declared_len(input).map(|n| n as u64)
}

/// The most `encoded_len` bytes of Snappy decode to: the densest element, a
/// 3-byte copy, yields 64 bytes.
pub(crate) fn max_decoded_len(encoded_len: u64) -> u64 {
    encoded_len.saturating_mul(22).saturating_add(64)
}

/// Decodes into `out`, which has the declared size.
pub(crate) fn decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    snap::raw::Decoder::new()
        .decompress(input, out)
        .map(Fill::Done)
        .map_err(|e| format!("bad Snappy data: {e}"))
}
