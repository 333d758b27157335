//! GDeflate through libdeflate's GDeflate code (`gdeflate-sys`): zarrs'
//! `gdeflate` layout of 64 KiB pages behind a header (`has_header: true`), or
//! one bare GDeflate stream per buffer (`has_header: false`).
//!
//! Each page is compressed on its own, so each decodes alone: pages of one
//! large buffer are encoded and decoded on several threads.
//!
//! Memory safety: libdeflate's GDeflate decoder reads its input in 4-byte
//! packets without checking the end of the input (it checks only stored
//! blocks), so malformed input makes it read past the end. Every page is
//! therefore copied into a zero-padded scratch buffer before decoding.
//! Past the end the decoder reads zeros; zero bits read as a block header mean
//! a non-final stored block, whose length check fails, and within a Huffman
//! block every symbol either writes output (at most 48 bits for 3 bytes, or 15
//! bits for 1) or ends the block. At most the 32 streams' buffered real bits
//! (256 bytes) can start further blocks. Reads past the end are thus bounded
//! by about 2 bytes per output byte plus a few headers: the padding is twice
//! the output capacity plus 64 KiB.

use std::cell::RefCell;

use gdeflate_sys as sys;
use rayon::prelude::*;

use super::{DecodeResult, Fill};
use crate::error::{Error, Result};
use crate::format::{self, gdeflate::PAGE_SIZE};

/// A libdeflate GDeflate compressor at one level, freed on drop.
struct GCompressor {
    level: i32,
    ptr: *mut sys::libdeflate_gdeflate_compressor,
}

impl Drop for GCompressor {
    fn drop(&mut self) {
        // SAFETY: allocated by libdeflate_alloc_gdeflate_compressor, freed once.
        unsafe { sys::libdeflate_free_gdeflate_compressor(self.ptr) }
    }
}

/// A libdeflate GDeflate decompressor, freed on drop.
struct GDecompressor(*mut sys::libdeflate_gdeflate_decompressor);

impl Drop for GDecompressor {
    fn drop(&mut self) {
        // SAFETY: allocated by libdeflate_alloc_gdeflate_decompressor, freed once.
        unsafe { sys::libdeflate_free_gdeflate_decompressor(self.0) }
    }
}

thread_local! {
    // (De)compressors are not thread-safe and costly to build: one per thread.
    static COMPRESSORS: RefCell<Vec<GCompressor>> = const { RefCell::new(Vec::new()) };
    static DECOMPRESSOR: RefCell<Option<GDecompressor>> = const { RefCell::new(None) };
    // The zero-padded copy of the page being decoded (see the module docs),
    // and how many leading bytes of it may be non-zero: everything after is
    // zero, so only the stream itself is copied in each time, not the padding.
    static SCRATCH: RefCell<(Vec<u8>, usize)> = const { RefCell::new((Vec::new(), 0)) };
    // What the compressor writes one page into, copied out at its exact size:
    // libdeflate asks for room well beyond a small page's compressed size.
    static COMPRESSED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The most a bare GDeflate stream decodes to: one page, as nvCOMP's batched
/// GDeflate compresses chunks of at most 64 KiB.
pub(crate) const MAX_BARE_DECODED_LEN: u64 = PAGE_SIZE as u64;

/// Compresses one page of at most 64 KiB into a single GDeflate stream.
fn compress_page(page: &[u8], level: i32, index: usize) -> Result<Vec<u8>> {
    debug_assert!(!page.is_empty() && page.len() <= PAGE_SIZE);
    let failed = |reason: &str| Error::Encode {
        index,
        reason: format!("GDeflate compression failed: {reason}"),
    };
    COMPRESSORS.with(|c| {
        let mut c = c.borrow_mut();
        let at = match c.iter().position(|g| g.level == level) {
            Some(at) => at,
            None => {
                // SAFETY: plain allocation; the level is within 0..=12.
                let ptr = unsafe { sys::libdeflate_alloc_gdeflate_compressor(level) };
                if ptr.is_null() {
                    return Err(failed("out of memory"));
                }
                c.push(GCompressor { level, ptr });
                c.len() - 1
            }
        };
        let comp = c[at].ptr;
        let mut npages = 0usize;
        // SAFETY: comp is live; npages is a valid out pointer.
        let bound = unsafe { sys::libdeflate_gdeflate_compress_bound(comp, page.len(), &mut npages) };
        if npages != 1 {
            return Err(failed("page split unexpectedly"));
        }
        COMPRESSED.with(|out| {
            let mut out = out.borrow_mut();
            if out.len() < bound {
                out.resize(bound, 0);
            }
            let mut out_page = sys::libdeflate_gdeflate_out_page {
                data: out.as_mut_ptr().cast(),
                nbytes: bound,
            };
            // SAFETY: input and output pointers and lengths describe live
            // slices; out_page.nbytes is the bound libdeflate asks for; one
            // page for <= 64 KiB.
            let n =
                unsafe { sys::libdeflate_gdeflate_compress(comp, page.as_ptr().cast(), page.len(), &mut out_page, 1) };
            if n == 0 || out_page.nbytes > bound {
                return Err(failed("no output"));
            }
            Ok(out[..out_page.nbytes].to_vec())
        })
    })
}

/// Encodes one buffer in zarrs' `gdeflate` layout, pages compressed in parallel.
pub(crate) fn encode_paged(input: &[u8], level: i32, index: usize) -> Result<Vec<u8>> {
    let pages = crate::pool::collect_in_order(
        input
            .par_chunks(PAGE_SIZE)
            .map(|page| compress_page(page, level, index)),
    )?;
    Ok(format::gdeflate::write(input.len(), pages.iter().map(Vec::as_slice)))
}

/// Encodes one buffer of at most 64 KiB as one bare GDeflate stream, as
/// nvCOMP's batched GDeflate does with its 64 KiB chunk limit. An empty buffer
/// encodes to an empty stream (libdeflate cannot write a zero-page stream).
pub(crate) fn encode_bare(input: &[u8], level: i32, index: usize) -> Result<Vec<u8>> {
    if input.len() > PAGE_SIZE {
        return Err(Error::InputTooLarge {
            index,
            size: input.len() as u64,
            limit: PAGE_SIZE as u64,
            algorithm: "gdeflate (has_header: false)",
        });
    }
    if input.is_empty() {
        return Ok(Vec::new());
    }
    compress_page(input, level, index)
}

/// The decoded length in the zarrs header, read before the page table so
/// that a huge claim is refused before any parsing or allocation.
pub(crate) fn declared_len(input: &[u8]) -> DecodeResult<u64> {
    format::gdeflate::sizes(input).map(|(decoded_len, _)| decoded_len)
}

/// The most `encoded_len` bytes of the paged layout decode to: each 64 KiB
/// page costs at least its 8-byte size entry (bare streams:
/// [`MAX_BARE_DECODED_LEN`]).
pub(crate) fn max_decoded_len(encoded_len: u64) -> u64 {
    encoded_len.saturating_sub(format::gdeflate::STATIC_HEADER_LEN as u64) / 8 * PAGE_SIZE as u64
}

/// Decodes one GDeflate stream, one page of at most 64 KiB, into `out` (any
/// capacity; at most 64 KiB of it is offered, which bounds the padding) from
/// a padded copy.
fn decode_stream(stream: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    let capacity = out.len().min(PAGE_SIZE);
    let out = &mut out[..capacity];
    let padding = out.len().saturating_mul(2).saturating_add(64 * 1024);
    SCRATCH.with(|s| {
        let (scratch, dirty) = &mut *s.borrow_mut();
        let needed = stream.len().saturating_add(padding);
        if scratch.len() < needed {
            scratch.resize(needed, 0);
        }
        scratch[..stream.len()].copy_from_slice(stream);
        if *dirty > stream.len() {
            scratch[stream.len()..*dirty].fill(0);
        }
        *dirty = stream.len();
        let result = DECOMPRESSOR.with(|d| {
            let mut d = d.borrow_mut();
            if d.is_none() {
                // SAFETY: plain allocation.
                let ptr = unsafe { sys::libdeflate_alloc_gdeflate_decompressor() };
                if ptr.is_null() {
                    return Err("out of memory for a GDeflate decompressor".to_string());
                }
                *d = Some(GDecompressor(ptr));
            }
            let decomp = d.as_ref().map_or(std::ptr::null_mut(), |g| g.0);
            let mut page = sys::libdeflate_gdeflate_in_page {
                data: scratch.as_ptr().cast(),
                nbytes: stream.len(),
            };
            // libdeflate adds to, not sets, the output count.
            let mut written = 0usize;
            // SAFETY: decomp is live; the page points at `stream.len()` real
            // bytes followed by `padding` readable zeros (module docs); out is
            // a live slice of out.len() bytes.
            let status = unsafe {
                sys::libdeflate_gdeflate_decompress(
                    decomp,
                    &mut page,
                    1,
                    out.as_mut_ptr().cast(),
                    out.len(),
                    &mut written,
                )
            };
            match status {
                sys::libdeflate_result_LIBDEFLATE_SUCCESS if written <= out.len() => Ok(Fill::Done(written)),
                sys::libdeflate_result_LIBDEFLATE_INSUFFICIENT_SPACE => Ok(Fill::NeedsMore),
                _ => Err("bad GDeflate data".to_string()),
            }
        });
        if scratch.capacity() > super::SCRATCH_KEEP_BYTES {
            // An unusually long stream: its copy is not kept for the thread's life.
            *scratch = Vec::new();
            *dirty = 0;
        }
        result
    })
}

/// Decodes a zarrs `gdeflate` buffer into `out`, which has the declared size;
/// pages decode in parallel into their own 64 KiB slices.
pub(crate) fn decode_paged_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    let parsed = format::gdeflate::parse(input)?;
    if parsed.decoded_len != out.len() {
        return Err(format!(
            "gdeflate header declares {} bytes, output holds {}",
            parsed.decoded_len,
            out.len()
        ));
    }
    let decode_page = |(i, (page, dst)): (usize, (&&[u8], &mut [u8]))| match decode_stream(page, dst)? {
        Fill::Done(n) if n == dst.len() => Ok(()),
        _ => Err(format!("gdeflate page {i} does not decode to its {} bytes", dst.len())),
    };
    if parsed.pages.len() > 1 {
        parsed
            .pages
            .par_iter()
            .zip(out.par_chunks_mut(PAGE_SIZE))
            .enumerate()
            .try_for_each(decode_page)?;
    } else {
        parsed
            .pages
            .iter()
            .zip(out.chunks_mut(PAGE_SIZE))
            .enumerate()
            .try_for_each(decode_page)?;
    }
    Ok(Fill::Done(out.len()))
}

/// Decodes one bare GDeflate stream into `out` (any capacity); an empty
/// stream is an empty buffer (see [`encode_bare`]).
pub(crate) fn decode_bare_to(input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
    if input.is_empty() {
        return Ok(Fill::Done(0));
    }
    decode_stream(input, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_decode_alone_and_bare_streams_are_bounded() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8 ^ (i / 1000) as u8).collect();
        let enc = encode_paged(&data, 6, 0).unwrap();
        let parsed = format::gdeflate::parse(&enc).unwrap();
        assert_eq!(parsed.pages.len(), 4);
        // The third page decodes on its own.
        let mut page = vec![0; PAGE_SIZE];
        assert_eq!(decode_stream(parsed.pages[2], &mut page), Ok(Fill::Done(PAGE_SIZE)));
        assert_eq!(page, data[2 * PAGE_SIZE..3 * PAGE_SIZE]);
        let mut out = vec![0; data.len()];
        assert_eq!(decode_paged_to(&enc, &mut out), Ok(Fill::Done(data.len())));
        assert_eq!(out, data);
        assert!(matches!(
            encode_bare(&data, 1, 7),
            Err(Error::InputTooLarge { index: 7, .. })
        ));
        let bare = encode_bare(&data[..1000], 1, 0).unwrap();
        assert_eq!(decode_bare_to(&bare, &mut [0; 10]), Ok(Fill::NeedsMore));
        assert!(decode_bare_to(&[0xff; 7], &mut [0; 100]).is_err());
        // A bare stream is one page: more than 64 KiB of room is not offered.
        let page = encode_bare(&data[..PAGE_SIZE], 1, 0).unwrap();
        let mut big = vec![0; 4 * PAGE_SIZE];
        assert_eq!(decode_bare_to(&page, &mut big), Ok(Fill::Done(PAGE_SIZE)));
        assert_eq!(&big[..PAGE_SIZE], &data[..PAGE_SIZE]);
        // Compressed pages are returned at their size, not libdeflate's bound.
        let tiny = encode_bare(b"12345678", 6, 0).unwrap();
        assert_eq!(tiny.capacity(), tiny.len());
    }
}
