//! Raw DEFLATE (RFC 1951) and zlib streams (RFC 1950).
//!
//! A raw DEFLATE stream has no framing: it declares no size, and its end is
//! found only by decoding it. A zlib stream wraps one:
//!
//! ```text
//! offset  bytes  field
//! 0       1      CMF: bits 3-0 method (8 = deflate), bits 7-4 window size
//! 1       1      FLG: bit 5 preset dictionary; CMF * 256 + FLG is a multiple of 31
//! 2       ...    raw DEFLATE stream
//! len-4   4      Adler-32 of the decoded data, u32 big endian
//! ```
//!
//! Streams with a preset dictionary (FDICT) are not read: the dictionary
//! would be needed to decode them.

/// Bytes of a zlib header (CMF, FLG).
pub(crate) const ZLIB_HEADER_LEN: usize = 2;

/// Bytes of a zlib trailer (Adler-32).
pub(crate) const ZLIB_TRAILER_LEN: usize = 4;

/// Checks the zlib header at the start of `stream`: deflate, no preset
/// dictionary, a valid check value.
pub(crate) fn check_zlib_header(stream: &[u8]) -> Result<(), String> {
    match stream {
        [cmf, flg, ..] if cmf & 0x0f == 8 && flg & 0x20 == 0 && u16::from_be_bytes([*cmf, *flg]) % 31 == 0 => Ok(()),
        _ => Err("not a zlib stream (bad header, or a preset dictionary)".into()),
    }
}

/// The Adler-32 a zlib stream declares in its trailer, `None` when it is
/// shorter than the trailer.
pub(crate) fn zlib_adler32(stream: &[u8]) -> Option<u32> {
    stream.last_chunk::<ZLIB_TRAILER_LEN>().map(|t| u32::from_be_bytes(*t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zlib_header_and_trailer_are_read() {
        let data = b"hello zlib";
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut enc, data).unwrap();
        let stream = enc.finish().unwrap();
        assert_eq!(check_zlib_header(&stream), Ok(()));
        assert_eq!(zlib_adler32(&stream), Some(simd_adler32::adler32(&&data[..])));
        // A preset dictionary, a broken check value, another method.
        assert!(check_zlib_header(&[0x78, 0xbb]).is_err());
        assert!(check_zlib_header(&[0x78, 0x9d]).is_err());
        assert!(check_zlib_header(&[0x77, 0x9c]).is_err());
        assert!(check_zlib_header(&stream[..1]).is_err());
        assert_eq!(zlib_adler32(&stream[..3]), None);
    }
}
