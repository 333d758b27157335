//! Raw Snappy (not the framed format).
//!
//! ```text
//! varint   decoded length (little-endian base-128, at most 5 bytes for u32)
//! ...      elements, each a tag byte whose low 2 bits give its kind:
//!          0 literal: length-1 in the tag's upper 6 bits, or 1-4 bytes after it
//!                     (tag values 60-63), then the literal bytes
//!          1 copy:    length 4-11 in 3 bits, 11-bit offset (3 bits + 1 byte)
//!          2 copy:    length 1-64 in 6 bits, 16-bit LE offset
//!          3 copy:    length 1-64 in 6 bits, 32-bit LE offset
//! ```
//!
//! A copy's offset counts back from the end of the output written so far.

/// The decoded length the varint preamble declares.
pub(crate) fn declared_len(buf: &[u8]) -> Result<usize, String> {
    snap::raw::decompress_len(buf).map_err(|e| format!("bad Snappy preamble: {e}"))
}

/// Walks the tags of a buffer without decoding it, and returns its decoded
/// length. Every literal and copy is checked to stay inside the input and the
/// declared output, so a buffer that passes cannot make a decoder read or
/// write out of bounds (nvCOMP's GPU decoder does not check this itself).
pub(crate) fn validate(buf: &[u8]) -> Result<usize, String> {
    let declared = declared_len(buf)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_accepts_real_data_and_rejects_damage() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let encoded = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(validate(&encoded).unwrap(), data.len());
        assert!(validate(&encoded[..encoded.len() - 3]).is_err());
        // A copy reaching back before the output start.
        assert!(validate(&[8, 0b0000_0001, 5]).is_err());
        let empty = snap::raw::Encoder::new().compress_vec(&[]).unwrap();
        assert_eq!(validate(&empty).unwrap(), 0);
    }
}
