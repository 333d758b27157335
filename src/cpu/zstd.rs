//! Zstandard: one frame per buffer, written with its content size at level 1
//! (numcodecs' default); frames without content size, with checksums, and
//! several frames back to back, skippable frames among them, are read too,
//! as numcodecs' `Zstd` reads them.

use std::cell::RefCell;
use std::io::Read;

use zstd::zstd_safe::{self, zstd_sys};

use super::{DecodeResult, Fill};
use crate::error::{Error, Result};
use crate::format;

/// Compression level of the CPU encoder (numcodecs' `Zstd` default).
pub const LEVEL: i32 = 1;

thread_local! {
    // Contexts are costly to create and reusable: one of each per thread.
    static CCTX: RefCell<Option<zstd_safe::CCtx<'static>>> = const { RefCell::new(None) };
    static DCTX: RefCell<Option<zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
}

/// Encodes one buffer as one frame that declares its content size.
pub fn encode(input: &[u8], index: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(input.len()));
    CCTX.with(|c| {
        let mut c = c.borrow_mut();
        let cctx = c.get_or_insert_with(zstd_safe::CCtx::create);
        // The one-shot API writes the content size into the frame header.
        cctx.compress(&mut out, input, LEVEL).map(drop)
    })
    .map_err(|code| Error::Corrupt {
        index,
        reason: format!("Zstandard compression failed: {}", zstd_safe::get_error_name(code)),
    })?;
    Ok(out)
}

/// The content size of all frames together, `None` when one of them is
/// streamed (declares none).
pub fn declared_len(input: &[u8]) -> DecodeResult<Option<u64>> {
    let frames = format::zstd_frames(input)?;
    Ok(frames
        .iter()
        .map(|f| f.content_size)
        .try_fold(0u64, |total, size| size.map(|s| total.saturating_add(s))))
}

/// The most `encoded_len` bytes of Zstandard decode to: an RLE block of 4
/// bytes (3-byte header and the byte) yields a whole 128 KiB block.
pub fn max_decoded_len(encoded_len: u64) -> u64 {
    encoded_len.saturating_mul(32 * 1024).saturating_add(128 * 1024)
}

/// Decodes every frame of `input` into `out` (any capacity).
pub fn decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    let result = DCTX.with(|d| {
        let mut d = d.borrow_mut();
        d.get_or_insert_with(zstd_safe::DCtx::create).decompress(out, input)
    });
    match result {
        Ok(n) => Ok(Fill::Done(n)),
        Err(code)
            if unsafe { zstd_sys::ZSTD_getErrorCode(code) }
                == zstd_sys::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall =>
        {
            Ok(Fill::NeedsMore)
        }
        Err(code) => Err(format!("bad Zstandard frame: {}", zstd_safe::get_error_name(code))),
    }
}

/// Why a streamed frame could not be decoded.
#[derive(Debug)]
pub enum StreamError {
    /// It decodes to more than the limit.
    TooLarge,
    /// It is malformed or truncated.
    Corrupt(String),
}

/// Decodes frames that declare no size with the streaming decoder, stopping
/// one byte past `limit` so that an endless stream costs at most that much.
pub fn decode_streamed(input: &[u8], limit: u64) -> std::result::Result<Vec<u8>, StreamError> {
    let decoder = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| StreamError::Corrupt(format!("Zstandard decoder: {e}")))?;
    let mut out = Vec::new();
    decoder
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| StreamError::Corrupt(format!("bad Zstandard frame: {e}")))?;
    if out.len() as u64 > limit {
        return Err(StreamError::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_declare_their_size_and_reject_truncation() {
        let data = b"zstd zstd zstd zstd".repeat(100);
        let enc = encode(&data, 0).unwrap();
        assert_eq!(declared_len(&enc).unwrap(), Some(data.len() as u64));
        let mut out = vec![0; data.len()];
        assert_eq!(decode_to(&enc, &mut out), Ok(Fill::Done(data.len())));
        assert_eq!(out, data);
        assert_eq!(decode_to(&enc, &mut [0; 10]), Ok(Fill::NeedsMore));
        assert!(decode_to(&enc[..enc.len() - 1], &mut out).is_err());
        assert!(decode_streamed(&enc[..enc.len() - 1], 1 << 20).is_err());
        assert!(matches!(decode_streamed(&enc, 10), Err(StreamError::TooLarge)));
    }
}
