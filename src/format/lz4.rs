//! numcodecs' `LZ4` layout.
//!
//! ```text
//! offset  bytes  field
//! 0       4      decoded length, u32 little endian
//! 4       ...    one LZ4 block (the C library's block format)
//! ```
//!
//! With `has_header: false` a buffer is the bare block, which declares no size.

/// Bytes of the decoded-length prefix.
pub const HEADER_LEN: usize = 4;

/// Splits a buffer into its declared decoded length and the LZ4 block.
pub fn split_header(buf: &[u8]) -> Result<(usize, &[u8]), String> {
    let (header, block) = buf
        .split_first_chunk::<HEADER_LEN>()
        .ok_or_else(|| format!("{} bytes is shorter than the 4-byte LZ4 length header", buf.len()))?;
    Ok((u32::from_le_bytes(*header) as usize, block))
}

/// The length header for `decoded_len` bytes.
pub fn write_header(decoded_len: usize) -> Result<[u8; HEADER_LEN], String> {
    u32::try_from(decoded_len)
        .map(u32::to_le_bytes)
        .map_err(|_| format!("{decoded_len} bytes does not fit the 4-byte LZ4 length header"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_short_buffers() {
        let mut buf = write_header(70_000).unwrap().to_vec();
        buf.extend_from_slice(b"block");
        assert_eq!(split_header(&buf).unwrap(), (70_000, &b"block"[..]));
        assert!(split_header(&buf[..3]).is_err());
        assert!(write_header(1 << 32).is_err());
    }
}
