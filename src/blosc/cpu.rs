//! Whole blosc chunks decoded on the host by c-blosc (the library zarrs'
//! `blosc` codec links), after [`super::format::parse`] has checked
//! every size and offset c-blosc would otherwise trust.

use std::ffi::c_void;

use super::format as blosc;

/// Decodes the blosc chunk `chunk` into `out`, which must be exactly its
/// decoded size; the reason where the chunk is malformed or does not decode.
pub(crate) fn decode_into(chunk: &[u8], out: &mut [u8]) -> Result<(), String> {
    let layout = blosc::parse(chunk).map_err(|e| format!("blosc: {e}"))?;
    let nbytes = layout.header.nbytes as usize;
    if nbytes != out.len() {
        return Err(format!(
            "blosc: the header declares {nbytes} decoded bytes, the chunk has {}",
            out.len()
        ));
    }
    if nbytes == 0 {
        return Ok(());
    }
    // SAFETY: `parse` checked that the header's compressed size, every block
    // offset and every stream lie within `chunk`; c-blosc writes at most
    // `out.len()` bytes.
    let written = unsafe {
        blosc_src::blosc_decompress_ctx(chunk.as_ptr().cast::<c_void>(), out.as_mut_ptr().cast(), out.len(), 1)
    };
    if usize::try_from(written).ok() != Some(nbytes) {
        return Err(format!("blosc: c-blosc failed to decode the chunk ({written})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrs::array::codec::bytes_to_bytes::blosc::{
        blosc_compress_bytes, BloscCompressionLevel, BloscCompressor, BloscShuffleMode,
    };

    #[test]
    fn decodes_what_c_blosc_encodes_and_refuses_lies() {
        let data: Vec<u8> = (0..10_001u32).map(|i| (i / 5) as u8).collect();
        let level = BloscCompressionLevel::try_from(5).unwrap();
        let chunk = blosc_compress_bytes(
            &data,
            level,
            BloscShuffleMode::Shuffle,
            4,
            BloscCompressor::BloscLZ,
            0,
            1,
        )
        .expect("c-blosc encodes");
        let mut out = vec![0u8; data.len()];
        decode_into(&chunk, &mut out).unwrap();
        assert_eq!(out, data);
        let mut short = vec![0u8; data.len() - 1];
        assert!(decode_into(&chunk, &mut short).unwrap_err().contains("declares"));
        assert!(decode_into(&chunk[..chunk.len() - 1], &mut out).is_err());
    }
}
