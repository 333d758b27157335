//! Framing of the encoded buffers, shared by the CPU and CUDA backends.
//!
//! Each function reads only what the format declares and checks every length
//! against the buffer before slicing, so a truncated or foreign buffer gives an
//! error instead of an out-of-bounds access.

/// Bytes of the decoded-length prefix of numcodecs' `LZ4` layout.
pub const LZ4_HEADER_LEN: usize = 4;

/// Decoded bytes per GDeflate page in zarrs' `gdeflate` layout.
pub const GDEFLATE_PAGE_SIZE: usize = 64 * 1024;

/// Bytes of the fixed part of zarrs' `gdeflate` header (decoded length, page count).
pub const GDEFLATE_STATIC_HEADER_LEN: usize = 16;

/// Splits a numcodecs `LZ4` buffer into its declared decoded length and the LZ4 block.
pub fn split_lz4_header(buf: &[u8]) -> Result<(usize, &[u8]), String> {
    let (header, block) = buf
        .split_first_chunk::<LZ4_HEADER_LEN>()
        .ok_or_else(|| format!("{} bytes is shorter than the 4-byte LZ4 length header", buf.len()))?;
    Ok((u32::from_le_bytes(*header) as usize, block))
}

/// Writes the numcodecs `LZ4` length header for `decoded_len` bytes.
pub fn lz4_header(decoded_len: usize) -> Result<[u8; LZ4_HEADER_LEN], String> {
    u32::try_from(decoded_len)
        .map(u32::to_le_bytes)
        .map_err(|_| format!("{decoded_len} bytes does not fit the 4-byte LZ4 length header"))
}

/// The content size a Zstandard frame declares, `None` when the frame omits it
/// (streamed frames).
pub fn zstd_content_size(buf: &[u8]) -> Result<Option<u64>, String> {
    zstd::zstd_safe::get_frame_content_size(buf).map_err(|_| "not a Zstandard frame".to_string())
}

/// The decoded length a gzip member declares in its trailer (ISIZE, modulo 2^32).
pub fn gzip_isize(buf: &[u8]) -> Result<u32, String> {
    if buf.len() < 18 || buf[0] != 0x1f || buf[1] != 0x8b {
        return Err("not a gzip member (bad magic or shorter than 18 bytes)".into());
    }
    let trailer: [u8; 4] = buf[buf.len() - 4..].try_into().unwrap();
    Ok(u32::from_le_bytes(trailer))
}

/// The decoded length a raw Snappy buffer declares in its varint preamble.
pub fn snappy_decoded_len(buf: &[u8]) -> Result<usize, String> {
    snap::raw::decompress_len(buf).map_err(|e| format!("bad Snappy preamble: {e}"))
}

/// A parsed zarrs `gdeflate` buffer: decoded length and its compressed pages.
#[derive(Debug)]
pub struct GdeflatePages<'a> {
    /// Decoded length of the whole buffer.
    pub decoded_len: usize,
    /// Compressed pages, in order; each decodes to [`GDEFLATE_PAGE_SIZE`] bytes
    /// except the last.
    pub pages: Vec<&'a [u8]>,
}

impl GdeflatePages<'_> {
    /// Decoded size of page `i`.
    pub fn page_decoded_len(&self, i: usize) -> usize {
        (self.decoded_len - i * GDEFLATE_PAGE_SIZE).min(GDEFLATE_PAGE_SIZE)
    }
}

/// Parses zarrs' `gdeflate` header: u64 LE decoded length, u64 LE page count,
/// one u64 LE compressed size per page, then the pages.
pub fn parse_gdeflate(buf: &[u8]) -> Result<GdeflatePages<'_>, String> {
    let read_u64 = |at: usize| -> Result<u64, String> {
        buf.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .ok_or_else(|| format!("gdeflate header truncated at byte {at} of {}", buf.len()))
    };
    let decoded_len = read_u64(0)?;
    let page_count = read_u64(8)?;
    let expected_pages = decoded_len.div_ceil(GDEFLATE_PAGE_SIZE as u64);
    if page_count != expected_pages {
        return Err(format!(
            "gdeflate header declares {page_count} pages for {decoded_len} decoded bytes, expected {expected_pages}"
        ));
    }
    let page_count = usize::try_from(page_count).map_err(|_| "gdeflate page count overflows".to_string())?;
    let sizes_end = page_count
        .checked_mul(8)
        .and_then(|n| n.checked_add(GDEFLATE_STATIC_HEADER_LEN))
        .filter(|end| *end <= buf.len())
        .ok_or_else(|| format!("gdeflate header of {page_count} pages does not fit {} bytes", buf.len()))?;
    let mut pages = Vec::with_capacity(page_count);
    let mut offset = sizes_end;
    for i in 0..page_count {
        let size = read_u64(GDEFLATE_STATIC_HEADER_LEN + 8 * i)?;
        let end = usize::try_from(size)
            .ok()
            .and_then(|s| offset.checked_add(s))
            .filter(|end| *end <= buf.len())
            .ok_or_else(|| format!("gdeflate page {i} of {size} bytes runs past the buffer end"))?;
        pages.push(&buf[offset..end]);
        offset = end;
    }
    if offset != buf.len() {
        return Err(format!(
            "{} trailing bytes after the last gdeflate page",
            buf.len() - offset
        ));
    }
    Ok(GdeflatePages {
        decoded_len: decoded_len as usize,
        pages,
    })
}

/// Writes zarrs' `gdeflate` header and pages into one buffer.
pub fn write_gdeflate<'a>(decoded_len: usize, pages: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    let data_len: usize = pages.clone().map(<[u8]>::len).sum();
    let mut out = Vec::with_capacity(GDEFLATE_STATIC_HEADER_LEN + 8 * pages.len() + data_len);
    out.extend_from_slice(&(decoded_len as u64).to_le_bytes());
    out.extend_from_slice(&(pages.len() as u64).to_le_bytes());
    for page in pages.clone() {
        out.extend_from_slice(&(page.len() as u64).to_le_bytes());
    }
    for page in pages {
        out.extend_from_slice(page);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_header_round_trips_and_rejects_short_buffers() {
        let mut buf = lz4_header(70_000).unwrap().to_vec();
        buf.extend_from_slice(b"block");
        assert_eq!(split_lz4_header(&buf).unwrap(), (70_000, &b"block"[..]));
        assert!(split_lz4_header(&buf[..3]).is_err());
        assert!(lz4_header(1 << 32).is_err());
    }

    #[test]
    fn gdeflate_header_round_trips_and_rejects_lies() {
        let pages: [&[u8]; 2] = [b"abc", b"de"];
        let buf = write_gdeflate(GDEFLATE_PAGE_SIZE + 10, pages.iter().copied());
        let parsed = parse_gdeflate(&buf).unwrap();
        assert_eq!(parsed.pages, pages);
        assert_eq!(parsed.page_decoded_len(0), GDEFLATE_PAGE_SIZE);
        assert_eq!(parsed.page_decoded_len(1), 10);
        assert!(parse_gdeflate(&buf[..buf.len() - 1]).is_err());
        let wrong_count = write_gdeflate(10, pages.iter().copied());
        assert!(parse_gdeflate(&wrong_count).is_err());
        let mut huge = buf.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse_gdeflate(&huge).is_err());
        assert_eq!(
            parse_gdeflate(&write_gdeflate(0, std::iter::empty()))
                .unwrap()
                .pages
                .len(),
            0
        );
    }

    #[test]
    fn gzip_and_zstd_sizes_are_read() {
        assert!(gzip_isize(b"\x1f\x8bshort").is_err());
        let frame = zstd::bulk::compress(&[7u8; 1000], 1).unwrap();
        assert_eq!(zstd_content_size(&frame).unwrap(), Some(1000));
        assert!(zstd_content_size(b"nonsense").is_err());
    }
}
