//! Tests of [`super::format`]: the blosc1 parser's decode items, decoded with
//! CPU codecs and unshuffled, equal c-blosc's own decode for every
//! compressor, shuffle, typesize and block size. (A module of their own:
//! they outgrow the parser's file.)

use std::io::Read;

use super::format::{parse, BloscCodec, BloscHeaderError, BloscItem, Shuffle, Unshuffle};
use zarrs::array::codec::bytes_to_bytes::blosc::{
    blosc_compress_bytes, blosc_decompress_bytes, BloscCompressionLevel, BloscCompressor, BloscShuffleMode,
};

const COMPRESSORS: [BloscCompressor; 6] = [
    BloscCompressor::BloscLZ,
    BloscCompressor::LZ4,
    BloscCompressor::LZ4HC,
    BloscCompressor::Snappy,
    BloscCompressor::Zlib,
    BloscCompressor::Zstd,
];
const SHUFFLES: [BloscShuffleMode; 3] = [
    BloscShuffleMode::NoShuffle,
    BloscShuffleMode::Shuffle,
    BloscShuffleMode::BitShuffle,
];

/// Compressible data with some noise, `len` bytes.
fn data(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((i / 7) as u8).wrapping_add((state % 4) as u8)
        })
        .collect()
}

/// Decodes one stream with this crate's CPU libraries; `None` for blosclz,
/// which has none.
fn decode_stream(codec: BloscCodec, src: &[u8], len: usize) -> Option<Vec<u8>> {
    let out = match codec {
        BloscCodec::BloscLz => return None,
        BloscCodec::Lz4 => lz4_flex::block::decompress(src, len).expect("lz4 block"),
        BloscCodec::Snappy => snap::raw::Decoder::new().decompress_vec(src).expect("snappy"),
        BloscCodec::Zlib => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(src).read_to_end(&mut out).expect("zlib");
            out
        }
        BloscCodec::Zstd => zstd::bulk::decompress(src, len).expect("zstd frame"),
    };
    Some(out)
}

/// The chunk decoded from its items, or `None` where an item is blosclz.
fn decode_items(chunk: &[u8]) -> Option<Vec<u8>> {
    let layout = parse(chunk).expect("a valid chunk parses");
    let mut shuffled = vec![0u8; layout.header.nbytes as usize];
    let mut covered = 0;
    for item in &layout.items {
        assert_eq!(item.dst.start, covered, "items tile the decoded chunk in order");
        covered = item.dst.end;
        let src = &chunk[item.src.clone()];
        match item.codec {
            None => shuffled[item.dst.clone()].copy_from_slice(src),
            Some(codec) => {
                let decoded = decode_stream(codec, src, item.dst.len())?;
                assert_eq!(decoded.len(), item.dst.len());
                shuffled[item.dst.clone()].copy_from_slice(&decoded);
            }
        }
    }
    assert_eq!(covered, shuffled.len());
    let mut out = shuffled.clone();
    for unshuffle in &layout.unshuffles {
        unshuffle.undo(&shuffled[unshuffle.block.clone()], &mut out[unshuffle.block.clone()]);
    }
    Some(out)
}

/// c-blosc's unshuffle of one block, with which these tests rebuild a chunk
/// from its items (the crate itself only validates chunks with [`parse`];
/// zarrs' `blosc` decodes them).
impl Unshuffle {
    /// Writes the unshuffled `block` (the decoded, shuffled bytes of this
    /// block) into `out`, both `self.block.len()` bytes.
    pub(crate) fn undo(&self, block: &[u8], out: &mut [u8]) {
        let t = self.typesize;
        let m = block.len() / t;
        match self.shuffle {
            Shuffle::None => out.copy_from_slice(block),
            Shuffle::Byte => {
                for i in 0..m {
                    for j in 0..t {
                        out[i * t + j] = block[j * m + i];
                    }
                }
            }
            Shuffle::Bit => {
                out[..m * t].fill(0);
                let row = m / 8;
                for j in 0..t {
                    for k in 0..8 {
                        let bits = &block[(j * 8 + k) * row..][..row];
                        for i in 0..m {
                            let bit = (bits[i / 8] >> (i % 8)) & 1;
                            out[i * t + j] |= bit << k;
                        }
                    }
                }
            }
        }
        out[m * t..].copy_from_slice(&block[m * t..]);
    }
}

#[test]
fn items_decode_like_c_blosc() {
    let level = BloscCompressionLevel::try_from(5).unwrap();
    let mut decoded_by_items = 0;
    for compressor in COMPRESSORS {
        for shuffle in SHUFFLES {
            for typesize in [1, 2, 3, 4, 8, 16, 17] {
                for blocksize in [0, 256, 4096, 1000] {
                    for len in [1, 5, 127, 20_000, 20_003] {
                        let input = data(len);
                        let chunk = blosc_compress_bytes(&input, level, shuffle, typesize, compressor, blocksize, 1)
                            .expect("blosc compresses");
                        let reference = blosc_decompress_bytes(&chunk, len, 1).expect("blosc decompresses");
                        assert_eq!(reference, input);
                        let case =
                            format!("{compressor:?} {shuffle:?} typesize {typesize} blocksize {blocksize} len {len}");
                        if let Some(out) = decode_items(&chunk) {
                            assert!(out == reference, "{case}: items decode differently from c-blosc");
                            decoded_by_items += 1;
                        } else {
                            assert_eq!(compressor, BloscCompressor::BloscLZ, "{case}");
                        }
                    }
                }
            }
        }
    }
    // Every non-blosclz case, and blosclz's stored ones.
    assert!(decoded_by_items >= 5 * 3 * 7 * 4 * 5, "{decoded_by_items}");
}

#[test]
fn corrupt_chunks_are_errors_not_panics() {
    let input = data(50_000);
    let level = BloscCompressionLevel::try_from(5).unwrap();
    let chunk = blosc_compress_bytes(
        &input,
        level,
        BloscShuffleMode::Shuffle,
        4,
        BloscCompressor::LZ4,
        4096,
        1,
    )
    .unwrap();
    assert!(matches!(
        parse(&chunk[..chunk.len() - 1]),
        Err(BloscHeaderError::CompressedSize { .. })
    ));
    // A byte of the header or the offsets table set to extreme values: an
    // error or a layout whose ranges lie inside the chunk.
    let table_end = 16 + 4 * 50_000usize.div_ceil(4096);
    for at in 0..table_end {
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut bad = chunk.clone();
            bad[at] = value;
            if let Ok(layout) = parse(&bad) {
                for item in layout.items {
                    assert!(item.src.end <= bad.len() && item.dst.end <= layout.header.nbytes as usize);
                }
            }
        }
    }
}

/// A blosc1 header: format version 2, compressor version 1.
fn header(flags: u8, typesize: u8, nbytes: u32, blocksize: u32, cbytes: u32) -> Vec<u8> {
    let mut h = vec![2, 1, flags, typesize];
    for v in [nbytes, blocksize, cbytes] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h
}

const MEMCPYED: u8 = 0x2;
const BYTE_SHUFFLE: u8 = 0x1;
const ZSTD: u8 = 4 << 5;

#[test]
fn memcpyed_chunk_is_one_copy() {
    let mut chunk = header(MEMCPYED | BYTE_SHUFFLE, 4, 8, 8, 24);
    chunk.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let layout = parse(&chunk).unwrap();
    assert_eq!(
        layout.items,
        [BloscItem {
            src: 16..24,
            dst: 0..8,
            codec: None
        }]
    );
    assert!(layout.unshuffles.is_empty());
    chunk[12] = 25;
    assert!(matches!(parse(&chunk), Err(BloscHeaderError::CompressedSize { .. })));
}

#[test]
fn streams_tile_the_blocks() {
    // Two blocks of 8 bytes, the second 4 bytes short; typesize 1: not split.
    let mut chunk = header(ZSTD, 1, 12, 8, 0);
    chunk.extend_from_slice(&24u32.to_le_bytes());
    chunk.extend_from_slice(&36u32.to_le_bytes());
    chunk.extend_from_slice(&8u32.to_le_bytes());
    chunk.extend_from_slice(&[9; 8]); // stored: the size equals the block's
    chunk.extend_from_slice(&3u32.to_le_bytes());
    chunk.extend_from_slice(&[7; 3]);
    let len = chunk.len() as u32;
    chunk[12..16].copy_from_slice(&len.to_le_bytes());
    let layout = parse(&chunk).unwrap();
    let item = |src, dst, codec| BloscItem { src, dst, codec };
    assert_eq!(
        layout.items,
        [item(28..36, 0..8, None), item(40..43, 8..12, Some(BloscCodec::Zstd))]
    );
    let mut bad = chunk.clone();
    bad[16] = 200;
    assert!(matches!(parse(&bad), Err(BloscHeaderError::Block { block: 0, .. })));
    bad = chunk.clone();
    bad[16] = 4; // inside the header
    assert!(matches!(parse(&bad), Err(BloscHeaderError::Block { block: 0, .. })));
}

#[test]
fn header_fields_are_checked() {
    assert!(matches!(parse(&[2, 1, 0]), Err(BloscHeaderError::TooShort { len: 3 })));
    // Too short for the offsets of its one block.
    assert!(matches!(
        parse(&header(0, 1, 8, 8, 16)),
        Err(BloscHeaderError::CompressedSize { .. })
    ));
    let mut v3 = header(0, 1, 8, 8, 16);
    v3[0] = 3;
    assert!(matches!(parse(&v3), Err(BloscHeaderError::Version { version: 3 })));
    assert!(matches!(
        parse(&header(7 << 5, 1, 8, 8, 16)),
        Err(BloscHeaderError::Compressor { code: 7, .. })
    ));
    assert!(matches!(
        parse(&header(0, 0, 8, 8, 16)),
        Err(BloscHeaderError::Geometry { .. })
    ));
    assert!(matches!(
        parse(&header(0x08, 1, 8, 8, 16)),
        Err(BloscHeaderError::ReservedFlag { .. })
    ));
    assert!(parse(&header(0, 1, 0, 0, 16)).unwrap().items.is_empty());
}

#[test]
fn byte_unshuffle_keeps_trailing_bytes() {
    let shuffled = [1, 3, 5, 2, 4, 6, 9]; // three 2-byte elements and a trailing byte
    let mut out = [0; 7];
    let unshuffle = Unshuffle {
        block: 0..7,
        shuffle: Shuffle::Byte,
        typesize: 2,
    };
    unshuffle.undo(&shuffled, &mut out);
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 9]);
}
