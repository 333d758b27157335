//! Zstandard: one frame per buffer, written with its content size at level 1
//! (numcodecs' default); frames without content size, with checksums, and
//! several frames back to back, skippable frames among them, are read too,
//! as numcodecs' `Zstd` reads them.

use std::cell::RefCell;

use zstd::zstd_safe::{self, zstd_sys};

use super::{DecodeResult, Fill, GrowError};
use crate::error::{Error, Result};
use crate::format;

/// Compression level of the CPU encoder (numcodecs' `Zstd` default).
pub(crate) const LEVEL: i32 = 1;

thread_local! {
    // Contexts are costly to create and reusable: one of each per thread.
    static CCTX: RefCell<Option<zstd_safe::CCtx<'static>>> = const { RefCell::new(None) };
    static DCTX: RefCell<Option<zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
}

/// Encodes one buffer as one frame that declares its content size.
pub(crate) fn encode(input: &[u8], index: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(input.len()));
    CCTX.with(|c| {
        let mut c = c.borrow_mut();
        let cctx = c.get_or_insert_with(zstd_safe::CCtx::create);
        // The one-shot API writes the content size into the frame header.
        cctx.compress(&mut out, input, LEVEL).map(drop)
    })
    .map_err(|code| Error::Encode {
        index,
        reason: format!("Zstandard compression failed: {}", zstd_safe::get_error_name(code)),
    })?;
    Ok(out)
}

/// The content size of all frames together, `None` when one of them is
/// streamed (declares none).
pub(crate) fn declared_len(input: &[u8]) -> DecodeResult<Option<u64>> {
    let frames = format::zstd::frames(input)?;
    Ok(frames
        .iter()
        .map(|f| f.content_size)
        .try_fold(0u64, |total, size| size.map(|s| total.saturating_add(s))))
}

/// The most `encoded_len` bytes of Zstandard decode to: an RLE block of 4
/// bytes (3-byte header and the byte) yields a whole 128 KiB block.
pub(crate) fn max_decoded_len(encoded_len: u64) -> u64 {
    encoded_len.saturating_mul(32 * 1024).saturating_add(128 * 1024)
}

/// Decodes every frame of `input` into `out` (any capacity).
pub(crate) fn decode_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
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

/// Bounds of what `input` decodes to, from its frames' block headers (see
/// [`format::zstd::Frame::decoded_len_bounds`]). `(0, None)` when the frames
/// cannot be walked (the decoder reports why).
fn decoded_len_bounds(input: &[u8]) -> (u64, Option<u64>) {
    let Ok(frames) = format::zstd::frames(input) else {
        return (0, None);
    };
    frames
        .iter()
        .map(format::zstd::Frame::decoded_len_bounds)
        .fold((0, Some(0)), |(least, most), (l, m)| {
            (least.saturating_add(l), most.map(|most: u64| most.saturating_add(m)))
        })
}

/// Decodes frames that declare no size with the streaming decoder into a
/// buffer that grows as it fills, never past `bound` bytes
/// ([`GrowError::Full`] when the frames need more). Frames whose raw and RLE
/// blocks alone exceed `bound` are refused before any decoding.
pub(crate) fn decode_streamed(input: &[u8], bound: usize) -> std::result::Result<Vec<u8>, GrowError> {
    let (least, most) = decoded_len_bounds(input);
    if least >= bound as u64 {
        return Err(GrowError::Full);
    }
    // Room for all the frames can hold, where the headers say: one
    // allocation, whose untouched part costs no memory.
    let first = most.map_or(input.len().saturating_mul(4).max(64 * 1024), |most| {
        usize::try_from(most).unwrap_or(usize::MAX).max(1)
    });
    let zstd_error = |code| GrowError::Corrupt(format!("bad Zstandard frame: {}", zstd_safe::get_error_name(code)));
    DCTX.with(|d| {
        let mut d = d.borrow_mut();
        let dctx = d.get_or_insert_with(zstd_safe::DCtx::create);
        dctx.reset(zstd_safe::ResetDirective::SessionOnly).map_err(zstd_error)?;
        let mut out = Vec::new();
        let mut src = zstd_safe::InBuffer::around(input);
        loop {
            if out.len() == out.capacity() {
                super::grow(&mut out, first, bound)?;
            }
            let pos = out.len();
            // The output buffer sets the vector's length as the decoder writes.
            let (hint, room_left) = {
                let mut dst = zstd_safe::OutBuffer::around_pos(&mut out, pos);
                let hint = dctx.decompress_stream(&mut dst, &mut src).map_err(zstd_error)?;
                (hint, dst.pos() < dst.capacity())
            };
            let consumed = src.pos() == input.len();
            if hint == 0 && consumed {
                return Ok(out);
            }
            if consumed && room_left {
                return Err(GrowError::Corrupt("truncated Zstandard frame".into()));
            }
        }
    })
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
        assert_eq!(decode_streamed(&enc, 10), Err(GrowError::Full));
        assert_eq!(decode_streamed(&enc, data.len() + 1).unwrap(), data);
    }

    /// A frame of `blocks` RLE blocks of 128 KiB each, without a content size.
    fn rle_frame(blocks: usize) -> Vec<u8> {
        // Magic, descriptor (no content size, not single segment), window 128 KiB.
        let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38];
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            let header = (128 * 1024) << 3 | 1 << 1 | last;
            frame.extend_from_slice(&header.to_le_bytes()[..3]);
            frame.push(b'z');
        }
        frame
    }

    #[test]
    fn the_limit_is_checked_on_block_headers_before_decoding() {
        // 64 KiB of input that decodes to 2 GiB: refused from its headers.
        let frame = rle_frame(16 * 1024);
        assert_eq!(declared_len(&frame).unwrap(), None);
        assert_eq!(decoded_len_bounds(&frame), (2 << 30, Some(2 << 30)));
        assert_eq!(decode_streamed(&frame, 1 << 30), Err(GrowError::Full));
        // Small enough frames of the same kind decode.
        let frame = rle_frame(3);
        assert_eq!(decode_streamed(&frame, 1 << 20).unwrap(), vec![b'z'; 3 * 128 * 1024]);
        // Two frames back to back, and a skippable frame between them, count together.
        let mut two = rle_frame(2);
        two.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 9, 9]);
        two.extend_from_slice(&rle_frame(2));
        assert_eq!(decoded_len_bounds(&two), (4 * 128 * 1024, Some(4 * 128 * 1024)));
        assert_eq!(decode_streamed(&two, 1 << 20).unwrap().len(), 4 * 128 * 1024);
    }
}
