//! The wave plans of blosc chunks, carried out on the host phase by phase as
//! the device does (CPU decoders for the streams, the format's unshuffle for
//! the blocks, then the rows), give what c-blosc decodes.

use zarrs::array::codec::bytes_to_bytes::blosc::{
    blosc_compress_bytes, BloscCompressionLevel, BloscCompressor, BloscShuffleMode,
};

use super::*;
use crate::array::geometry::box_copy::BoxCopy;

/// Carries out `batch` into `out` on the host, in the device's phases.
fn run_on_host(batch: &BloscBatch<'_>, out: &mut [u8]) {
    let mut shuffled = vec![0u8; batch.shuffled_len];
    for streams in &batch.batches {
        for (k, (input, dst)) in streams.inputs.iter().zip(&streams.outputs).enumerate() {
            let decoded = crate::cpu::decode_batch(&streams.algorithm, &[input], u64::MAX).unwrap();
            let decoded = decoded.get(0);
            assert_eq!(decoded.len(), dst.len());
            if let Some((_, stored)) = streams.adler32.iter().find(|(j, _)| *j == k) {
                assert_eq!(simd_adler32::adler32(&decoded), *stored);
            }
            shuffled[dst.clone()].copy_from_slice(decoded);
        }
    }
    for (bytes, at) in &batch.stored {
        shuffled[*at..at + bytes.len()].copy_from_slice(bytes);
    }
    let mut unshuffled = vec![0u8; batch.unshuffled_len];
    for b in &batch.blocks {
        let target = match b.dst {
            BlockTarget::Output(at) => &mut out[at..at + b.len],
            BlockTarget::Unshuffled(at) => &mut unshuffled[at..at + b.len],
        };
        let unshuffle = blosc::Unshuffle {
            block: 0..b.len,
            shuffle: b.shuffle,
            typesize: b.typesize,
        };
        unshuffle.undo(&shuffled[b.src..b.src + b.len], target);
    }
    for &(target, len) in &batch.chunks {
        let chunk = match target {
            BlockTarget::Output(at) => &mut out[at..at + len],
            BlockTarget::Unshuffled(at) => &mut unshuffled[at..at + len],
        };
        batch.filters.apply(chunk);
    }
    let mut widened = vec![0u8; batch.widened_len];
    if let Some(widen) = &batch.scale_offset {
        for w in &batch.widen {
            let floats = &mut widened[w.dst..w.dst + widen.decoded_len(w.len)];
            widen.apply(&unshuffled[w.src..w.src + w.len], floats);
        }
    }
    let rows_source = if batch.scale_offset.is_some() {
        &widened
    } else {
        &unshuffled
    };
    // The fill value repeated over the longest row the fills read.
    let fill = batch
        .scatter
        .fill_value
        .repeat(out.len() / batch.scatter.fill_value.len() + 1);
    for (source, rows) in batch
        .scatter
        .copies
        .iter()
        .map(|(_, r)| (rows_source, r))
        .chain(batch.scatter.fills.iter().map(|r| (&fill, r)))
    {
        for r in 0..rows.rows {
            let (s, d) = (
                rows.src_offset + r * rows.src_pitch,
                rows.dst_offset + r * rows.dst_pitch,
            );
            out[d..d + rows.width].copy_from_slice(&source[s..s + rows.width]);
        }
    }
}

/// Compressible data with some noise; `noise` of 256 makes it incompressible.
fn data(len: usize, noise: u64) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..len)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((i / 11) as u8).wrapping_add((state % noise) as u8)
        })
        .collect()
}

fn compress(bytes: &[u8], compressor: BloscCompressor, shuffle: BloscShuffleMode, typesize: usize) -> Vec<u8> {
    let level = BloscCompressionLevel::try_from(5).unwrap();
    blosc_compress_bytes(bytes, level, shuffle, typesize, compressor, 0, 1).unwrap()
}

/// A 1-D array of `chunks` chunks of `chunk_len` elements of `elem` bytes,
/// read from element `skip` on: the first chunk is then partly placed, the
/// others whole runs of the output. Returns the chunks' decoded bytes and
/// their places.
fn places(chunks: usize, chunk_len: u64, elem: usize, skip: u64) -> Vec<BoxCopy> {
    let total = chunks as u64 * chunk_len - skip;
    (0..chunks as u64)
        .map(|c| {
            let start = (c * chunk_len).max(skip);
            let local = start - c * chunk_len;
            BoxCopy::new(
                &[chunk_len],
                &[local],
                &[total],
                &[start - skip],
                &[chunk_len - local],
                elem,
            )
        })
        .collect()
}

/// Plans and runs a wave of the `encoded` chunks, `None` missing, whose
/// decoded bytes are `chunk_bytes` each; returns the output.
fn read(encoded: &[Option<Vec<u8>>], chunk_bytes: usize, elem: usize, skip: u64, fill: &[u8]) -> Vec<u8> {
    read_filtered(
        encoded,
        (chunk_bytes, elem),
        skip,
        fill,
        (ElementFilters::default(), None),
    )
}

/// [`read`], undoing `filters` and widening by `scale_offset` on each chunk
/// (whose stored elements then are `elem` bytes).
fn read_filtered(
    encoded: &[Option<Vec<u8>>],
    (chunk_bytes, elem): (usize, usize),
    skip: u64,
    fill: &[u8],
    (filters, scale_offset): (ElementFilters, Option<ScaleOffset>),
) -> Vec<u8> {
    let chunk_len = (chunk_bytes / elem) as u64;
    // Placed elements: the widened floats where a fixedscaleoffset widens them.
    let placed = scale_offset.map_or(elem, |w| w.decoded_size());
    let places = places(encoded.len(), chunk_len, placed, skip);
    let keys: Vec<String> = (0..encoded.len()).map(|c| format!("c/{c}")).collect();
    let wave: Vec<WaveItem<'_>> = encoded
        .iter()
        .zip(&places)
        .zip(&keys)
        .map(|((bytes, place), key)| WaveItem {
            key,
            stream: bytes.as_deref(),
            decoded_len: chunk_bytes,
            place,
            adler32: None,
        })
        .collect();
    let chunks: Vec<Option<Chunk>> = wave.iter().map(prepare).collect::<Result<_, _>>().unwrap();
    let mut batch = plan_batch(&wave, &chunks, (fill, true), scale_offset);
    batch.filters = filters;
    let out_len = (encoded.len() * chunk_len as usize - skip as usize) * placed;
    batch.assert_within(out_len);
    let mut out = vec![0u8; out_len];
    run_on_host(&batch, &mut out);
    out
}

const COMPRESSORS: [BloscCompressor; 6] = [
    BloscCompressor::LZ4,
    BloscCompressor::LZ4HC,
    BloscCompressor::Zstd,
    BloscCompressor::Zlib,
    BloscCompressor::Snappy,
    BloscCompressor::BloscLZ,
];

#[test]
fn plans_decode_like_c_blosc() {
    let shuffles = [
        BloscShuffleMode::NoShuffle,
        BloscShuffleMode::Shuffle,
        BloscShuffleMode::BitShuffle,
    ];
    for compressor in COMPRESSORS {
        for shuffle in shuffles {
            for elem in [1, 2, 4, 8] {
                // Odd sizes: blocks end short; 3 chunks, the second incompressible.
                let chunk_bytes = elem * 9_973;
                let array: Vec<u8> = [data(chunk_bytes, 3), data(chunk_bytes, 256), data(chunk_bytes, 5)].concat();
                let encoded: Vec<Option<Vec<u8>>> = array
                    .chunks(chunk_bytes)
                    .map(|c| Some(compress(c, compressor, shuffle, elem)))
                    .collect();
                let case = format!("{compressor:?} {shuffle:?} {elem}");
                assert_ne!(encoded[1].as_ref().unwrap()[2] & 0x2, 0, "{case}: memcpyed");
                for skip in [0, 5] {
                    let got = read(&encoded, chunk_bytes, elem, skip, &[0]);
                    assert!(got == array[skip as usize * elem..], "{case} skip {skip}");
                }
            }
        }
    }
}

#[test]
fn filters_are_undone_on_each_chunk_where_it_is_unshuffled() {
    let (elem, chunk_bytes) = (4, 4 * 3_001);
    let array = data(3 * chunk_bytes, 7);
    let encoded: Vec<Option<Vec<u8>>> = array
        .chunks(chunk_bytes)
        .map(|c| Some(compress(c, BloscCompressor::Zstd, BloscShuffleMode::Shuffle, elem)))
        .collect();
    let filters = ElementFilters {
        swap: 4,
        delta: Some(crate::format::filters::DeltaType::Int(4)),
    };
    let mut want = array.clone();
    want.chunks_mut(chunk_bytes).for_each(|c| filters.apply(c));
    for skip in [0, 5] {
        // Skipping elements puts the first chunk in the scratch, the others in the output.
        let got = read_filtered(&encoded, (chunk_bytes, elem), skip, &[0], (filters, None));
        assert!(got == want[skip as usize * elem..], "skip {skip}");
    }
    assert_ne!(want, array);
}

#[test]
fn scaled_integers_are_widened_after_the_swap() {
    let (elem, chunk_bytes) = (2, 2 * 3_001);
    let array = data(3 * chunk_bytes, 7);
    let encoded: Vec<Option<Vec<u8>>> = array
        .chunks(chunk_bytes)
        .map(|c| Some(compress(c, BloscCompressor::LZ4, BloscShuffleMode::Shuffle, elem)))
        .collect();
    let filters = ElementFilters { swap: 2, delta: None };
    let widen = ScaleOffset {
        stored_size: 2,
        signed: true,
        wide: false,
        scale: 10.0,
        offset: 0.1,
    };
    let mut want = Vec::new();
    for chunk in array.chunks(chunk_bytes) {
        let mut stored = chunk.to_vec();
        filters.apply(&mut stored);
        let mut floats = vec![0; widen.decoded_len(stored.len())];
        widen.apply(&stored, &mut floats);
        want.extend(floats);
    }
    for skip in [0, 5] {
        // Every chunk is widened into the scratch of floats, which the rows read.
        let got = read_filtered(&encoded, (chunk_bytes, elem), skip, &[0; 4], (filters, Some(widen)));
        assert!(got == want[skip as usize * 4..], "skip {skip}");
    }
}

#[test]
fn batches_group_streams_by_algorithm_and_missing_chunks_get_the_fill() {
    let elem = 4;
    let chunk_bytes = 4 * 5_000;
    let array = data(3 * chunk_bytes, 2);
    let encoded: Vec<Option<Vec<u8>>> = vec![
        Some(compress(
            &array[..chunk_bytes],
            BloscCompressor::LZ4,
            BloscShuffleMode::Shuffle,
            elem,
        )),
        None,
        Some(compress(
            &array[2 * chunk_bytes..],
            BloscCompressor::Zstd,
            BloscShuffleMode::Shuffle,
            elem,
        )),
    ];
    let got = read(&encoded, chunk_bytes, elem, 3, &[1, 2, 3, 4]);
    let mut want = array.clone();
    want[chunk_bytes..2 * chunk_bytes].copy_from_slice(&[1, 2, 3, 4].repeat(chunk_bytes / 4));
    assert!(got == want[3 * elem..]);

    let places = places(1, 5_000, elem, 0);
    let item = WaveItem {
        key: "c/0",
        stream: encoded[0].as_deref(),
        decoded_len: chunk_bytes,
        place: &places[0],
        adler32: None,
    };
    let chunks = [
        prepare(&item).unwrap(),
        prepare(&WaveItem {
            stream: encoded[2].as_deref(),
            ..item
        })
        .unwrap(),
    ];
    let batch = plan_batch(&[item, item], &chunks, (&[0], true), None);
    let algorithms: Vec<Algorithm> = batch.batches.iter().map(|b| b.algorithm).collect();
    assert_eq!(algorithms, [algorithm(BloscCodec::Lz4), Algorithm::Zstd]);
    assert_eq!(batch.unshuffled_len, 0, "whole runs unshuffle into the output");
}

#[test]
fn corrupt_chunks_are_errors_naming_the_chunk() {
    let chunk_bytes = 8_000;
    let good = compress(
        &data(chunk_bytes, 3),
        BloscCompressor::LZ4,
        BloscShuffleMode::Shuffle,
        4,
    );
    let places = places(1, 2_000, 4, 0);
    let prepared = |bytes: &[u8], decoded_len| {
        prepare(&WaveItem {
            key: "c/7",
            stream: Some(bytes),
            decoded_len,
            place: &places[0],
            adler32: None,
        })
    };
    assert!(matches!(prepared(&good, chunk_bytes), Ok(Some(Chunk::Streams(_)))));
    let mut bad_version = good.clone();
    bad_version[0] = 9;
    let mut bad_stream = good.clone();
    let first_block = u32::from_le_bytes(good[16..20].try_into().unwrap()) as usize;
    bad_stream[first_block + 4..first_block + 12].fill(0xff);
    for bad in [&bad_version[..], &good[..10], &good[..good.len() - 3], &bad_stream] {
        match prepared(bad, chunk_bytes) {
            Err(ReadError::Corrupt { key, reason }) => assert!(key == "c/7" && reason.contains("blosc"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
    // Damaged LZ4 data parses: the decode pass's host check walks each
    // stream against its exact size while it stages the batch, and refuses
    // it. (A compressible chunk: `good`'s streams are stored as they are.)
    let good = compress(
        &data(chunk_bytes, 1),
        BloscCompressor::LZ4,
        BloscShuffleMode::Shuffle,
        4,
    );
    let Ok(Some(Chunk::Streams(intact))) = prepared(&good, chunk_bytes) else {
        panic!("the intact chunk parses")
    };
    let first = intact
        .items
        .iter()
        .find(|s| s.codec == Some(BloscCodec::Lz4))
        .expect("an LZ4 stream")
        .src
        .clone();
    let mut bad_lz4 = good.clone();
    bad_lz4[first.start + first.len() / 2..first.end].fill(0xff);
    let layout = match prepared(&bad_lz4, chunk_bytes) {
        Ok(Some(Chunk::Streams(layout))) => layout,
        other => panic!("damaged LZ4 data parses: {other:?}"),
    };
    // The LZ4 batch's streams (others are stored as they are).
    let coded: Vec<_> = layout
        .items
        .iter()
        .filter(|s| s.codec == Some(BloscCodec::Lz4))
        .collect();
    assert!(
        coded.iter().any(|s| s.src.contains(&(first.end - 1))),
        "the damage is in an LZ4 stream"
    );
    let streams = |chunk: &[u8]| -> Vec<Vec<u8>> { coded.iter().map(|s| chunk[s.src.clone()].to_vec()).collect() };
    let sizes: Vec<usize> = coded.iter().map(|s| s.dst.len()).collect();
    let lz4 = algorithm(BloscCodec::Lz4);
    let check = |chunk: &[u8]| {
        let streams = streams(chunk);
        let views: Vec<&[u8]> = streams.iter().map(Vec::as_slice).collect();
        crate::cuda::chunking::check_on_host(&lz4, &views, Some(&sizes)).map(drop)
    };
    assert!(check(&good).is_ok());
    assert!(check(&bad_lz4).is_err());
    match prepared(&good, chunk_bytes + 4) {
        Err(ReadError::ChunkSize { key, expected, actual }) => {
            assert_eq!((key.as_str(), expected, actual), ("c/7", chunk_bytes + 4, chunk_bytes));
        }
        other => panic!("{other:?}"),
    }
}
