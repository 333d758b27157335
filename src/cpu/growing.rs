//! Decoding streams that declare no decoded size (bare LZ4 blocks, raw
//! deflate, gzip, bare GDeflate streams, streamed Zstandard frames) into buffers
//! that grow as they fill, bounded by the caller's limit and by the most the
//! format can expand to.

use super::codec::{Codec, Format};
use super::{deflate, zstd, Fill};
use crate::error::{Error, Result};

/// Why a stream without a declared size did not decode into a bounded,
/// growing buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GrowError {
    /// The buffer reached its bound and the stream still had more to write.
    Full,
    /// The allocator refused a buffer of this many bytes.
    OutOfMemory(usize),
    /// The stream is malformed or truncated.
    Corrupt(String),
}

/// Bytes a stream without a declared size is first decoded into: a typical
/// ratio, so most streams decode in one go.
fn first_capacity(encoded_len: usize) -> usize {
    encoded_len.saturating_mul(4).max(64 * 1024)
}

/// Grows `out`'s capacity for a stream that writes into it: doubling, from
/// `first`, never past `bound`. [`GrowError::Full`] once it holds `bound`;
/// the allocation is fallible, so a refused one is an error, not an abort.
pub(crate) fn grow(out: &mut Vec<u8>, first: usize, bound: usize) -> std::result::Result<(), GrowError> {
    if out.capacity() >= bound {
        return Err(GrowError::Full);
    }
    let target = out.capacity().saturating_mul(2).max(first).min(bound);
    out.try_reserve_exact(target - out.len())
        .map_err(|_| GrowError::OutOfMemory(target))
}

/// Per-thread scratch above this many bytes is freed after use, so that one
/// large stream does not pin its memory on every decoding thread.
pub(crate) const SCRATCH_KEEP_BYTES: usize = 1 << 20;

thread_local! {
    // The buffer that formats without a streaming decoder (bare LZ4 blocks,
    // bare GDeflate streams) decode into, growing until the stream fits.
    static GROW_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Decodes `input` (a format without a streaming decoder) into the thread's
/// scratch, doubled until the stream fits, up to `bound`; returns a copy of
/// exactly the decoded bytes.
fn decode_retrying(codec: Codec, input: &[u8], bound: usize) -> std::result::Result<Vec<u8>, GrowError> {
    GROW_SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let mut cap = first_capacity(input.len()).min(bound);
        let result = loop {
            if scratch.len() < cap {
                let more = cap - scratch.len();
                if scratch.try_reserve_exact(more).is_err() {
                    break Err(GrowError::OutOfMemory(cap));
                }
                scratch.resize(cap, 0);
            }
            match codec.decode_to(input, &mut scratch[..cap]) {
                Ok(Fill::Done(n)) => break Ok(scratch[..n].to_vec()),
                Ok(Fill::NeedsMore) if cap < bound => cap = cap.saturating_mul(2).min(bound),
                Ok(Fill::NeedsMore) => break Err(GrowError::Full),
                Err(reason) => break Err(GrowError::Corrupt(reason)),
            }
        };
        if scratch.capacity() > SCRATCH_KEEP_BYTES {
            *scratch = Vec::new();
        }
        result
    })
}

/// Decodes a buffer that declares no size into a buffer that grows until
/// the stream fits, up to `limit` and to what the format can expand to:
/// Zstandard and deflate with their streaming decoders (no stream is decoded
/// twice), the others into a scratch buffer that doubles.
pub(super) fn decode_growing(codec: Codec, input: &[u8], index: usize, limit: u64) -> Result<Vec<u8>> {
    let most = codec.max_expansion(input.len());
    let bound = usize::try_from(limit.min(most)).unwrap_or(usize::MAX);
    let result = match codec.format {
        // Stopping one byte past the bound tells a stream of exactly `bound`
        // bytes from a longer one.
        Format::Zstd => zstd::decode_streamed(input, bound.saturating_add(1)),
        // The streaming decoder resumes where it stopped: a small start costs
        // no second decode.
        Format::Deflate { .. } => {
            deflate::inflate_growing(input, input.len().saturating_mul(4).max(4096), bound.saturating_add(1))
        }
        // The last member's ISIZE is the whole size of most streams (one
        // member, under 4 GiB): decoded in one go.
        Format::Gzip { .. } => {
            let hint = deflate::gzip_size_hint(input).map_err(|reason| Error::Corrupt { index, reason })?;
            let first = usize::try_from(hint)
                .unwrap_or(usize::MAX)
                .clamp(1, bound.saturating_add(1));
            deflate::gzip_growing(input, first, bound.saturating_add(1))
        }
        _ => decode_retrying(codec, input, bound),
    };
    // A streaming decoder that stopped one byte past the bound wrote more than the bound.
    let result = result.and_then(|v| if v.len() > bound { Err(GrowError::Full) } else { Ok(v) });
    result.map_err(|e| grow_error(codec, input.len(), index, limit, e))
}

/// The length buffer `index` decodes to where it is measured without being
/// held (gzip, see [`deflate::gzip_decoded_len`]), up to `limit`; `None`
/// for the other formats.
pub(super) fn decoded_len(codec: Codec, input: &[u8], index: usize, limit: u64) -> Option<Result<u64>> {
    let bound = limit.min(codec.max_expansion(input.len()));
    match codec.format {
        Format::Gzip { .. } => {
            Some(deflate::gzip_decoded_len(input, bound).map_err(|e| grow_error(codec, input.len(), index, limit, e)))
        }
        _ => None,
    }
}

/// The error of buffer `index` (`encoded_len` bytes) whose decoding stopped
/// with `e`, under the caller's `limit`.
fn grow_error(codec: Codec, encoded_len: usize, index: usize, limit: u64, e: GrowError) -> Error {
    let most = codec.max_expansion(encoded_len);
    match e {
        GrowError::Full if limit < most => Error::DecodedSizeTooLarge {
            // Reported as at least one byte over the limit: the real size is unknown.
            index,
            size: limit.saturating_add(1),
            limit,
        },
        GrowError::Full => Error::Corrupt {
            index,
            reason: format!(
                "decodes to more than the {most} bytes {encoded_len} encoded bytes of {} can hold",
                codec.name()
            ),
        },
        GrowError::OutOfMemory(size) => Error::OutOfMemory {
            index,
            size: size as u64,
        },
        GrowError::Corrupt(reason) => Error::Corrupt { index, reason },
    }
}
