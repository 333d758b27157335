//! The blosc1 parser's decode items, decoded with CPU codecs and unshuffled,
//! equal c-blosc's own decode for every compressor, shuffle, typesize and
//! block size.

use std::io::Read;

use zarrs::array::codec::bytes_to_bytes::blosc::{
    blosc_compress_bytes, blosc_decompress_bytes, BloscCompressionLevel, BloscCompressor, BloscShuffleMode,
};
use zarrs_nvcomp::blosc_header::{parse, BloscCodec, BloscHeaderError};

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
