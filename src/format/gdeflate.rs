//! zarrs' `gdeflate` layout: a buffer of independent GDeflate pages behind a
//! page table.
//!
//! ```text
//! offset         bytes  field
//! 0              8      decoded length, u64 little endian
//! 8              8      page count n = ceil(decoded length / 64 KiB), u64 LE
//! 16             8 n    compressed size of each page, u64 LE
//! 16 + 8 n       ...    the pages, back to back, nothing after the last
//! ```
//!
//! Every page decodes to 64 KiB ([`PAGE_SIZE`]) except the last, which holds
//! the rest. With `has_header: false` a buffer is one bare GDeflate stream
//! (nvCOMP's), which declares no size.

use std::ops::Range;

use super::{u64_le, BufferEnds};

/// Decoded bytes per page.
pub(crate) const PAGE_SIZE: usize = 64 * 1024;

/// Bytes of the fixed part of the header (decoded length, page count).
pub(crate) const STATIC_HEADER_LEN: usize = 16;

/// Bytes of the header of a buffer of `page_count` pages.
pub(crate) fn header_len(page_count: usize) -> usize {
    STATIC_HEADER_LEN + 8 * page_count
}

/// The decoded length and page count the header declares, read before
/// anything is allocated for the pages.
pub(crate) fn sizes(head: &[u8]) -> Result<(u64, u64), String> {
    match (u64_le(head, 0), u64_le(head, 8)) {
        (Some(decoded_len), Some(page_count)) => Ok((decoded_len, page_count)),
        _ => Err(format!(
            "{} bytes is shorter than the 16-byte gdeflate header",
            head.len()
        )),
    }
}

/// The length of the whole header (page table included) of a buffer of
/// `len` bytes starting with `head`, checked against the declared decoded
/// length and against `len`: the head a reader needs for [`page_table`].
pub(crate) fn declared_header_len(head: &[u8], len: usize) -> Result<usize, String> {
    let (decoded_len, page_count) = sizes(head)?;
    let expected = decoded_len.div_ceil(PAGE_SIZE as u64);
    if page_count != expected {
        return Err(format!(
            "gdeflate header declares {page_count} pages for {decoded_len} decoded bytes, expected {expected}"
        ));
    }
    usize::try_from(page_count)
        .ok()
        .and_then(|n| n.checked_mul(8))
        .and_then(|n| n.checked_add(STATIC_HEADER_LEN))
        .filter(|end| *end <= len)
        .ok_or_else(|| format!("gdeflate header of {page_count} pages does not fit {len} bytes"))
}

/// A checked page table: the decoded length and where each page lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageTable {
    /// Decoded length of the whole buffer.
    pub(crate) decoded_len: usize,
    /// Byte range of each compressed page within the buffer, in order.
    pub(crate) pages: Vec<Range<usize>>,
}

/// Decoded size of page `i` of a buffer of `decoded_len` bytes.
pub(crate) fn page_decoded_len(decoded_len: usize, i: usize) -> usize {
    (decoded_len - i * PAGE_SIZE).min(PAGE_SIZE)
}

/// Reads the page table of a buffer whose head holds at least
/// [`declared_header_len`] bytes, and checks that the pages fill the buffer
/// exactly.
pub(crate) fn page_table(ends: BufferEnds<'_>) -> Result<PageTable, String> {
    let table_end = declared_header_len(ends.head, ends.len)?;
    let table = ends.head.get(STATIC_HEADER_LEN..table_end).ok_or_else(|| {
        format!(
            "the gdeflate page table needs the first {table_end} bytes, {} given",
            ends.head.len()
        )
    })?;
    let mut pages = Vec::with_capacity(table.len() / 8);
    let mut start = table_end;
    for (i, size) in table.chunks_exact(8).enumerate() {
        let size = u64::from_le_bytes(size.try_into().expect("8 bytes"));
        let end = usize::try_from(size)
            .ok()
            .and_then(|s| start.checked_add(s))
            .filter(|end| *end <= ends.len)
            .ok_or_else(|| format!("gdeflate page {i} of {size} bytes runs past the buffer end"))?;
        pages.push(start..end);
        start = end;
    }
    if start != ends.len {
        return Err(format!(
            "{} trailing bytes after the last gdeflate page",
            ends.len - start
        ));
    }
    let (decoded_len, _) = sizes(ends.head)?;
    Ok(PageTable {
        // At most 8 KiB per byte of the page table, which is in memory.
        decoded_len: decoded_len as usize,
        pages,
    })
}

/// A parsed buffer held on the host: decoded length and its compressed pages.
#[derive(Debug)]
pub(crate) struct Pages<'a> {
    /// Decoded length of the whole buffer.
    pub(crate) decoded_len: usize,
    /// Compressed pages, in order; each decodes to [`PAGE_SIZE`] bytes
    /// except the last.
    pub(crate) pages: Vec<&'a [u8]>,
}

/// Parses a whole buffer into its pages.
pub(crate) fn parse(buf: &[u8]) -> Result<Pages<'_>, String> {
    let table = page_table(BufferEnds::of(buf))?;
    Ok(Pages {
        decoded_len: table.decoded_len,
        pages: table.pages.into_iter().map(|r| &buf[r]).collect(),
    })
}

/// The header of a buffer of `decoded_len` bytes whose pages compress to
/// `page_sizes` bytes each.
pub(crate) fn write_header(decoded_len: usize, page_sizes: impl ExactSizeIterator<Item = usize>) -> Vec<u8> {
    let mut out = Vec::with_capacity(header_len(page_sizes.len()));
    out.extend_from_slice(&(decoded_len as u64).to_le_bytes());
    out.extend_from_slice(&(page_sizes.len() as u64).to_le_bytes());
    for size in page_sizes {
        out.extend_from_slice(&(size as u64).to_le_bytes());
    }
    out
}

/// Writes the header and the pages into one buffer.
pub(crate) fn write<'a>(decoded_len: usize, pages: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    let mut out = write_header(decoded_len, pages.clone().map(<[u8]>::len));
    out.reserve_exact(pages.clone().map(<[u8]>::len).sum());
    for page in pages {
        out.extend_from_slice(page);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_lies() {
        let pages: [&[u8]; 2] = [b"abc", b"de"];
        let buf = write(PAGE_SIZE + 10, pages.iter().copied());
        assert_eq!(buf.len(), header_len(2) + 5);
        let parsed = parse(&buf).unwrap();
        assert_eq!(parsed.pages, pages);
        assert_eq!(page_decoded_len(parsed.decoded_len, 0), PAGE_SIZE);
        assert_eq!(page_decoded_len(parsed.decoded_len, 1), 10);
        assert!(parse(&buf[..buf.len() - 1]).is_err());
        let wrong_count = write(10, pages.iter().copied());
        assert!(parse(&wrong_count).is_err());
        let mut huge = buf.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&huge).is_err());
        assert_eq!(parse(&write(0, std::iter::empty())).unwrap().pages.len(), 0);
        assert!(sizes(&buf[..15]).unwrap_err().contains("16-byte gdeflate header"));
    }

    #[test]
    fn a_partial_head_says_how_much_it_needs() {
        let buf = write(PAGE_SIZE + 5, [&b"abc"[..], b"de"].into_iter());
        let head = &buf[..20];
        assert_eq!(declared_header_len(head, buf.len()), Ok(32));
        let partial = BufferEnds {
            head,
            tail: &[],
            len: buf.len(),
        };
        assert!(page_table(partial).unwrap_err().contains("first 32 bytes"));
        let table = page_table(BufferEnds::of(&buf)).unwrap();
        assert_eq!(table.pages, vec![32..35, 35..37]);
        assert_eq!(page_decoded_len(table.decoded_len, 1), 5);
        // A table that claims more pages than the buffer can hold.
        assert!(declared_header_len(head, 24).is_err());
    }
}
