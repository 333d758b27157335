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
pub(crate) const HEADER_LEN: usize = 4;

/// Splits a buffer into its declared decoded length and the LZ4 block.
pub(crate) fn split_header(buf: &[u8]) -> Result<(usize, &[u8]), String> {
    let (header, block) = buf
        .split_first_chunk::<HEADER_LEN>()
        .ok_or_else(|| format!("{} bytes is shorter than the 4-byte LZ4 length header", buf.len()))?;
    Ok((u32::from_le_bytes(*header) as usize, block))
}

/// The length header for `decoded_len` bytes.
pub(crate) fn write_header(decoded_len: usize) -> Result<[u8; HEADER_LEN], String> {
    u32::try_from(decoded_len)
        .map(u32::to_le_bytes)
        .map_err(|_| format!("{decoded_len} bytes does not fit the 4-byte LZ4 length header"))
}

/// Checks that `block` is an LZ4 block that decodes to exactly
/// `decoded_len` bytes, by walking its sequences without decoding them: every
/// literal run lies within the block, every match copies from bytes already
/// decoded (offset 1 or more, at most the bytes decoded so far), and nothing
/// is written past `decoded_len`. A block that passes decodes to one
/// well-defined output, which is what a GPU decoder that does not validate
/// its input needs to be safe.
///
/// Sequence layout: a token (high nibble: literal length, low nibble: match
/// length - 4; 15 continues in bytes that add up to 255 each until one is
/// less), the literals, then (except in the last sequence) a 2-byte little
/// endian offset and the match length's continuation bytes.
pub(crate) fn validate_block(block: &[u8], decoded_len: usize) -> Result<(), String> {
    fn length(block: &[u8], at: &mut usize, nibble: usize) -> Result<usize, String> {
        let mut len = nibble;
        if nibble == 15 {
            loop {
                let byte = *block
                    .get(*at)
                    .ok_or_else(|| format!("LZ4 length runs past the end at byte {at}"))?;
                *at += 1;
                len = len.checked_add(usize::from(byte)).ok_or("LZ4 length overflows")?;
                if byte != 255 {
                    break;
                }
            }
        }
        Ok(len)
    }
    let (mut at, mut out) = (0usize, 0usize);
    loop {
        let token = *block
            .get(at)
            .ok_or_else(|| format!("LZ4 block ends before its last sequence, at byte {at}"))?;
        at += 1;
        let literals = length(block, &mut at, usize::from(token >> 4))?;
        if literals > block.len() - at {
            return Err(format!(
                "LZ4 literals of {literals} bytes run past the end at byte {at}"
            ));
        }
        at += literals;
        out = out.saturating_add(literals);
        if out > decoded_len {
            return Err(format!(
                "LZ4 block decodes to more than the declared {decoded_len} bytes"
            ));
        }
        if at == block.len() {
            break;
        }
        let offset = block
            .get(at..at + 2)
            .map(|o| usize::from(u16::from_le_bytes([o[0], o[1]])))
            .ok_or_else(|| format!("LZ4 match offset truncated at byte {at}"))?;
        at += 2;
        if offset == 0 || offset > out {
            return Err(format!(
                "LZ4 match offset {offset} at byte {} reaches before the start of the output ({out} bytes decoded)",
                at - 2
            ));
        }
        let matched = length(block, &mut at, usize::from(token & 15))?.saturating_add(4);
        out = out.saturating_add(matched);
        if out > decoded_len {
            return Err(format!(
                "LZ4 block decodes to more than the declared {decoded_len} bytes"
            ));
        }
    }
    if out != decoded_len {
        return Err(format!(
            "LZ4 block decodes to {out} bytes, not the declared {decoded_len}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_walk_accepts_what_the_cpu_decodes_and_nothing_else() {
        let data: Vec<u8> = (0..200_000u32).map(|i| ((i / 7) % 251) as u8 ^ (i % 3) as u8).collect();
        let block = lz4_flex::block::compress(&data);
        validate_block(&block, data.len()).unwrap();
        assert!(validate_block(&block, data.len() - 1).is_err());
        assert!(validate_block(&block, data.len() + 1).is_err());
        assert!(validate_block(&block[..block.len() - 1], data.len()).is_err());
        validate_block(&lz4_flex::block::compress(&[]), 0).unwrap();
        // Mutants: whatever the walk accepts, the CPU decodes to the declared size.
        let (mut state, mut accepted) = (0x2545_f491_4f6c_dd1du64, 0);
        for _ in 0..3000 {
            let mut bad = block.clone();
            for _ in 0..3 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % bad.len() as u64) as usize;
                bad[at] ^= (state >> 32) as u8 | 1;
            }
            if validate_block(&bad, data.len()).is_ok() {
                let mut out = vec![0u8; data.len()];
                let n = lz4_flex::block::decompress_into(&bad, &mut out);
                assert_eq!(n.ok(), Some(data.len()), "the walk accepted a block the CPU rejects");
                accepted += 1;
            }
        }
        // Flips inside literals keep a block valid: the property was exercised.
        assert!(accepted > 0);
    }

    #[test]
    fn header_round_trips_and_rejects_short_buffers() {
        let mut buf = write_header(70_000).unwrap().to_vec();
        buf.extend_from_slice(b"block");
        assert_eq!(split_header(&buf).unwrap(), (70_000, &b"block"[..]));
        assert!(split_header(&buf[..3]).is_err());
        assert!(write_header(1 << 32).is_err());
    }
}
