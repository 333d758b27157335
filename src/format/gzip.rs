//! One gzip member (RFC 1952).
//!
//! ```text
//! offset  bytes  field
//! 0       2      magic 0x1f 0x8b
//! 2       1      CM, 8 = deflate
//! 3       1      FLG: FHCRC 2, FEXTRA 4, FNAME 8, FCOMMENT 16
//! 4       6      MTIME (4), XFL (1), OS (1)
//! 10      ...    FEXTRA: u16 LE length and that many bytes; FNAME, FCOMMENT:
//!                zero-terminated; FHCRC: 2 bytes
//! ...     ...    raw DEFLATE stream
//! len-8   4      CRC-32 of the decoded data, u32 LE
//! len-4   4      ISIZE, decoded length modulo 2^32, u32 LE
//! ```
//!
//! The shortest member (empty data, fixed header) is 18 bytes.

use super::{u32_le, BufferEnds};

/// The header this project writes: magic, CM = deflate, no flags, no mtime,
/// no extra flags, OS = unknown (as zlib and flate2 write it).
pub(crate) const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// Bytes of the trailer (CRC-32, ISIZE).
pub(crate) const TRAILER_LEN: usize = 8;

/// Bytes of the fixed header and the trailer: no member is shorter.
pub(crate) const MIN_LEN: usize = HEADER.len() + TRAILER_LEN;

/// Bytes a reader of the [`trailer`] needs from the start of a buffer.
pub(crate) const MAGIC_LEN: usize = 2;

/// What a member's trailer declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trailer {
    /// CRC-32 of the decoded data.
    pub(crate) crc32: u32,
    /// Decoded length modulo 2^32.
    pub(crate) isize: u32,
}

impl Trailer {
    /// The trailer of `data`'s member.
    pub(crate) fn of(data: &[u8]) -> Self {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        Self {
            crc32: crc.sum(),
            isize: data.len() as u32,
        }
    }

    /// The trailer stored in `bytes`.
    pub(crate) fn from_bytes(bytes: &[u8; TRAILER_LEN]) -> Self {
        let [c0, c1, c2, c3, s0, s1, s2, s3] = *bytes;
        Self {
            crc32: u32::from_le_bytes([c0, c1, c2, c3]),
            isize: u32::from_le_bytes([s0, s1, s2, s3]),
        }
    }

    /// The trailer's bytes.
    pub(crate) fn to_bytes(self) -> [u8; TRAILER_LEN] {
        let mut bytes = [0; TRAILER_LEN];
        bytes[..4].copy_from_slice(&self.crc32.to_le_bytes());
        bytes[4..].copy_from_slice(&self.isize.to_le_bytes());
        bytes
    }
}

/// Checks a member's magic and length and reads its trailer; the head needs
/// [`MAGIC_LEN`] bytes, the tail [`TRAILER_LEN`].
pub(crate) fn trailer(ends: BufferEnds<'_>) -> Result<Trailer, String> {
    let magic = ends.head.get(..MAGIC_LEN) == Some(&HEADER[..MAGIC_LEN]);
    match (u32_le(ends.tail, 0), u32_le(ends.tail, 4)) {
        (Some(crc32), Some(isize)) if magic && ends.len >= MIN_LEN && ends.tail.len() == TRAILER_LEN => {
            Ok(Trailer { crc32, isize })
        }
        _ => Err("not a gzip member (bad magic or shorter than 18 bytes)".into()),
    }
}

/// Length of the header of `buf`, its optional fields included.
pub(crate) fn header_len(buf: &[u8]) -> Result<usize, String> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let bad = |why: &str| format!("bad gzip header: {why}");
    if buf.len() < HEADER.len() || buf[..MAGIC_LEN] != HEADER[..MAGIC_LEN] {
        return Err(bad("no magic"));
    }
    if buf[2] != 8 {
        return Err(bad("compression method is not deflate"));
    }
    let flags = buf[3];
    let mut at = HEADER.len();
    if flags & FEXTRA != 0 {
        let len = buf.get(at..at + 2).ok_or_else(|| bad("truncated extra field"))?;
        at += 2 + u16::from_le_bytes([len[0], len[1]]) as usize;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let rest = buf.get(at..).ok_or_else(|| bad("truncated"))?;
            at += 1 + rest
                .iter()
                .position(|b| *b == 0)
                .ok_or_else(|| bad("unterminated name or comment"))?;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    if at + TRAILER_LEN > buf.len() {
        return Err(bad("truncated"));
    }
    Ok(at)
}

/// The bytes of `buf`, a gzip member, that hold its DEFLATE stream:
/// between its header and its trailer.
pub(crate) fn body(buf: &[u8]) -> Result<std::ops::Range<usize>, String> {
    Ok(header_len(buf)?..buf.len() - TRAILER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_and_header_are_read() {
        let data = b"gzip data";
        let mut member = HEADER.to_vec();
        member.extend_from_slice(&[3, 0]); // an empty fixed-Huffman block
        member.extend_from_slice(&Trailer::of(data).to_bytes());
        assert_eq!(MIN_LEN, 18);
        let trailer = trailer(BufferEnds::of(&member)).unwrap();
        assert_eq!(trailer.isize, 9);
        assert_eq!(trailer, Trailer::of(data));
        assert_eq!(header_len(&member), Ok(10));
        assert!(super::trailer(BufferEnds::of(b"\x1f\x8bshort")).is_err());
        member[0] = 0;
        assert!(super::trailer(BufferEnds::of(&member)).is_err());
        assert!(header_len(&member).is_err());
    }
}
