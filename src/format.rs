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

/// The decoded length and page count that a zarrs `gdeflate` header declares,
/// read before anything is allocated for the pages.
pub fn gdeflate_sizes(buf: &[u8]) -> Result<(u64, u64), String> {
    let header = buf
        .first_chunk::<GDEFLATE_STATIC_HEADER_LEN>()
        .ok_or_else(|| format!("{} bytes is shorter than the 16-byte gdeflate header", buf.len()))?;
    let (len, count) = header.split_at(8);
    Ok((
        u64::from_le_bytes(len.try_into().unwrap()),
        u64::from_le_bytes(count.try_into().unwrap()),
    ))
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

/// Walks the tags of a raw Snappy buffer without decoding it, and returns its
/// decoded length. Every literal and copy is checked to stay inside the input
/// and the declared output, so a buffer that passes cannot make a decoder read
/// or write out of bounds (nvCOMP's GPU decoder does not check this itself).
pub fn validate_snappy(buf: &[u8]) -> Result<usize, String> {
    let declared = snappy_decoded_len(buf)?;
    let mut at = varint_len(buf);
    let mut produced = 0usize;
    let err = |what: &str, at: usize| format!("Snappy {what} at byte {at}");
    while at < buf.len() {
        let tag = buf[at];
        at += 1;
        let (len, offset) = match tag & 3 {
            0 => {
                let short = (tag >> 2) as usize;
                let len = if short < 60 {
                    short + 1
                } else {
                    let extra = short - 59;
                    let bytes = buf
                        .get(at..at + extra)
                        .ok_or_else(|| err("literal length past the end", at))?;
                    at += extra;
                    bytes.iter().rev().fold(0usize, |acc, b| (acc << 8) | *b as usize) + 1
                };
                if len > buf.len() - at {
                    return Err(err("literal past the end", at));
                }
                at += len;
                (len, None)
            }
            1 => {
                let low = *buf.get(at).ok_or_else(|| err("copy past the end", at))? as usize;
                at += 1;
                (4 + ((tag >> 2) & 7) as usize, Some(((tag as usize >> 5) << 8) | low))
            }
            kind => {
                let width = if kind == 2 { 2 } else { 4 };
                let bytes = buf.get(at..at + width).ok_or_else(|| err("copy past the end", at))?;
                at += width;
                let offset = bytes.iter().rev().fold(0usize, |acc, b| (acc << 8) | *b as usize);
                (1 + (tag >> 2) as usize, Some(offset))
            }
        };
        if let Some(offset) = offset {
            if offset == 0 || offset > produced {
                return Err(err("copy from before the start of the output", at));
            }
        }
        produced += len;
        if produced > declared {
            return Err(format!("Snappy data decodes past its declared {declared} bytes"));
        }
    }
    if produced != declared {
        return Err(format!(
            "Snappy data decodes to {produced} bytes, its preamble declares {declared}"
        ));
    }
    Ok(declared)
}

fn varint_len(buf: &[u8]) -> usize {
    buf.iter().position(|b| b & 0x80 == 0).map_or(buf.len(), |i| i + 1)
}

/// One data frame of a Zstandard buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZstdFrame {
    /// Its bytes within the buffer.
    pub range: std::ops::Range<usize>,
    /// The content size its header declares, `None` for streamed frames.
    pub content_size: Option<u64>,
    /// Bytes its raw and RLE blocks decode to.
    pub raw_and_rle_bytes: u64,
    /// Number of its compressed blocks (each decodes to at most 128 KiB).
    pub compressed_blocks: u64,
}

/// Walks a buffer of Zstandard frames back to back, as libzstd and numcodecs'
/// `Zstd` read it: the data frames in order, skippable frames left out. Only
/// frame and block headers are read (not block contents), so truncated or
/// padded buffers are caught before a decoder sees them.
pub fn zstd_frames(buf: &[u8]) -> Result<Vec<ZstdFrame>, String> {
    const MAGIC: u32 = 0xFD2F_B528;
    // Skippable frames: magic 0x184D2A50 to 0x184D2A5F, u32 LE length, payload.
    const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
    const SKIPPABLE: u32 = 0x184D_2A50;
    if buf.is_empty() {
        return Err("an empty buffer is not a Zstandard frame".into());
    }
    let mut frames = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let rest = &buf[at..];
        let magic = rest.first_chunk::<4>().map(|m| u32::from_le_bytes(*m));
        let len = match magic {
            Some(MAGIC) => {
                let walk = zstd_frame_blocks(rest).map_err(|e| format!("{e} (frame at byte {at})"))?;
                let content_size = zstd_content_size(rest)?;
                frames.push(ZstdFrame {
                    range: at..at + walk.len,
                    content_size,
                    raw_and_rle_bytes: walk.raw_and_rle_bytes,
                    compressed_blocks: walk.compressed_blocks,
                });
                walk.len
            }
            Some(m) if m & SKIPPABLE_MASK == SKIPPABLE => {
                let size = rest
                    .get(4..8)
                    .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")) as usize)
                    .ok_or_else(|| format!("Zstandard skippable frame header truncated at byte {at}"))?;
                if size > rest.len() - 8 {
                    return Err(format!("Zstandard skippable frame at byte {at} runs past the end"));
                }
                8 + size
            }
            _ => return Err(format!("not a Zstandard frame (bad magic number) at byte {at}")),
        };
        at += len;
    }
    Ok(frames)
}

/// What the block headers of a Zstandard frame say.
struct FrameBlocks {
    /// Bytes of the frame, checksum included.
    len: usize,
    /// Bytes its raw and RLE blocks decode to.
    raw_and_rle_bytes: u64,
    /// Number of its compressed blocks.
    compressed_blocks: u64,
}

/// The length and blocks of the Zstandard frame at the start of `buf` (its
/// magic number checked by the caller), from its frame header and block headers.
fn zstd_frame_blocks(buf: &[u8]) -> Result<FrameBlocks, String> {
    let descriptor = *buf.get(4).ok_or("Zstandard frame header truncated")?;
    let single_segment = descriptor & 0x20 != 0;
    let checksum = descriptor & 0x04 != 0;
    let dict_bytes = [0, 1, 2, 4][(descriptor & 3) as usize];
    let size_bytes = match descriptor >> 6 {
        0 if single_segment => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut at = 5 + usize::from(!single_segment) + dict_bytes + size_bytes;
    let (mut raw_and_rle_bytes, mut compressed_blocks) = (0u64, 0u64);
    loop {
        let header = buf
            .get(at..at + 3)
            .ok_or_else(|| format!("Zstandard block header truncated at byte {at}"))?;
        let header = u32::from(header[0]) | u32::from(header[1]) << 8 | u32::from(header[2]) << 16;
        at += 3;
        let size = (header >> 3) as usize;
        let body = match (header >> 1) & 3 {
            0 => {
                raw_and_rle_bytes += size as u64;
                size
            }
            1 => {
                raw_and_rle_bytes += size as u64;
                1
            }
            2 => {
                compressed_blocks += 1;
                size
            }
            _ => return Err(format!("reserved Zstandard block type at byte {}", at - 3)),
        };
        if body > buf.len() - at.min(buf.len()) {
            return Err(format!(
                "Zstandard block of {body} bytes runs past the end at byte {at}"
            ));
        }
        at += body;
        if header & 1 == 1 {
            break;
        }
    }
    at += if checksum { 4 } else { 0 };
    if at > buf.len() {
        return Err("Zstandard checksum truncated".into());
    }
    Ok(FrameBlocks {
        len: at,
        raw_and_rle_bytes,
        compressed_blocks,
    })
}

#[cfg(test)]
mod validation_tests {
    use super::*;

    #[test]
    fn snappy_walk_accepts_real_data_and_rejects_damage() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let encoded = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(validate_snappy(&encoded).unwrap(), data.len());
        assert!(validate_snappy(&encoded[..encoded.len() - 3]).is_err());
        // A copy reaching back before the output start.
        assert!(validate_snappy(&[8, 0b0000_0001, 5]).is_err());
        let empty = snap::raw::Encoder::new().compress_vec(&[]).unwrap();
        assert_eq!(validate_snappy(&empty).unwrap(), 0);
    }

    #[test]
    fn zstd_walk_accepts_frames_and_rejects_truncation_and_padding() {
        let data = vec![3u8; 300_000];
        for checksum in [false, true] {
            let mut frame = Vec::new();
            let mut enc = zstd::stream::Encoder::new(&mut frame, 1).unwrap();
            enc.include_checksum(checksum).unwrap();
            std::io::Write::write_all(&mut enc, &data).unwrap();
            enc.finish().unwrap();
            let frames = zstd_frames(&frame).unwrap();
            let spans: Vec<_> = frames.iter().map(|f| (f.range.clone(), f.content_size)).collect();
            assert_eq!(spans, vec![(0..frame.len(), None)]);
            // 300,000 equal bytes: blocks of at most 128 KiB, raw, RLE or compressed.
            let f = &frames[0];
            assert!(
                f.raw_and_rle_bytes + f.compressed_blocks * 128 * 1024 >= 300_000,
                "{f:?}"
            );
            assert!(zstd_frames(&frame[..frame.len() - 1]).is_err());
            let mut padded = frame.clone();
            padded.push(0);
            assert!(zstd_frames(&padded).is_err());
        }
        let empty = zstd::bulk::compress(&[], 1).unwrap();
        assert_eq!(zstd_frames(&empty).unwrap()[0].content_size, Some(0));
        assert!(zstd_frames(b"garbage!").is_err());
        assert!(zstd_frames(b"").is_err());
    }

    #[test]
    fn zstd_walk_splits_concatenated_and_skips_skippable_frames() {
        let a = zstd::bulk::compress(&[1u8; 1000], 1).unwrap();
        let b = zstd::bulk::compress(&[2u8; 70_000], 3).unwrap();
        let mut skippable = 0x184D_2A5Bu32.to_le_bytes().to_vec();
        skippable.extend(5u32.to_le_bytes());
        skippable.extend(b"notes");
        let buf = [skippable.as_slice(), &a, &skippable, &b].concat();
        let at_a = skippable.len();
        let at_b = at_a + a.len() + skippable.len();
        let spans: Vec<_> = zstd_frames(&buf)
            .unwrap()
            .into_iter()
            .map(|f| (f.range, f.content_size))
            .collect();
        assert_eq!(
            spans,
            vec![(at_a..at_a + a.len(), Some(1000)), (at_b..buf.len(), Some(70_000))]
        );
        // A skippable frame that claims more bytes than there are.
        assert!(zstd_frames(&[&a[..], &skippable[..6]].concat()).is_err());
        let mut long = skippable.clone();
        long[4] = 6;
        assert!(zstd_frames(&[&a[..], &long].concat()).is_err());
    }
}
