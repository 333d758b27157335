//! Blosc chunks on the batched GPU path: each fetched chunk's header is
//! parsed on the host ([`super::format::parse`]), and the streams of
//! all chunks of a wave become one [`BloscBatch`]: every compressed stream
//! an item of the nvCOMP batch of its algorithm (raw LZ4 blocks, Snappy,
//! Zstandard frames, zlib streams as raw DEFLATE with their Adler-32 checked
//! on the device), every stored stream a copy, every block an entry of the
//! unshuffle launch ([`crate::cuda::CudaEngine::decode_blosc`]).
//!
//! The chain's element filters ([`ElementFilters`]) are undone on each chunk
//! once it is unshuffled, where it is (in the output, or in the scratch its
//! rows are copied from). A `fixedscaleoffset` ([`ScaleOffset`]) then
//! widens each chunk, unshuffled in the scratch, into a scratch of floats
//! that the rows are copied from.
//!
//! Each chunk's header decides: a chunk whose streams are blosclz (no GPU
//! decoder), whatever the metadata says, is decoded whole on the host by
//! c-blosc and uploaded as it is. A chunk that does not parse, or declares
//! another decoded size than its place in the array, is an error naming it.

use std::ops::Range;

use rayon::prelude::*;

use super::format::{self as blosc, BloscCodec, BloscItem, BloscLayout, Shuffle};
use crate::algorithm::{Algorithm, DataType};
use crate::array::error::ReadError;
use crate::array::wave_item::{fill_is_zero, item_error, WaveItem};
use crate::cuda::{
    BlockPlace, BlockTarget, BloscBatch, CudaEngine, DecodeOptions, DeviceRegion, RowCopy, Scatter, StreamBatch,
    WidenPlace,
};
use crate::format::deflate;
use crate::format::filters::ElementFilters;
use crate::format::scale_offset::ScaleOffset;

/// Alignment of each chunk in the scratches: the decoders' outputs of a
/// chunk's first stream start aligned.
const ALIGN: usize = 256;

/// How one fetched chunk of a wave is decoded.
#[derive(Debug)]
enum Chunk {
    /// Its streams go to the device, as the layout says.
    Streams(BloscLayout),
    /// Decoded on the host (blosclz), uploaded as it is.
    Decoded(Vec<u8>),
}

/// Decodes `wave` into `out` (device memory of `engine`), undoing `filters`
/// and `scale_offset` on each chunk, the places of missing chunks filled
/// with `fill` (written also where it is zero unless `zeroed`: the output
/// starts zeroed).
pub(crate) fn decode_on_device(
    engine: &CudaEngine,
    out: DeviceRegion,
    (fill, zeroed): (&[u8], bool),
    (options, filters, scale_offset): (DecodeOptions, ElementFilters, Option<ScaleOffset>),
    wave: &[WaveItem<'_>],
) -> Result<(), ReadError> {
    // Host work only: nothing to wait for before a mark.
    let mut profile = crate::profile::Profile::new(|| {});
    let chunks: Vec<Option<Chunk>> = crate::pool::collect_in_order(wave.par_iter().map(prepare))?;
    profile.mark("blosc headers parsed");
    let mut batch = plan_batch(wave, &chunks, (fill, zeroed), scale_offset);
    batch.filters = filters;
    profile.mark("blosc batch planned");
    drop(profile);
    // SAFETY: the output is device memory of `engine`, owned by the wave
    // decoder for the whole read or lent to it, untouched by anything else
    // while the read runs; the places of a read's items do not
    // overlap, and waves are decoded one after the other.
    unsafe { engine.decode_blosc(&batch, out, options) }.map_err(|e| item_error(e, |i| wave[i].key.to_string()))
}

/// Parses and checks the chunk of `item` (`None` where it is missing).
fn prepare(item: &WaveItem<'_>) -> Result<Option<Chunk>, ReadError> {
    let Some(bytes) = item.stream else {
        return Ok(None);
    };
    let corrupt = |reason: String| ReadError::Corrupt {
        key: item.key.to_string(),
        reason,
    };
    let layout = blosc::parse(bytes).map_err(|e| corrupt(format!("blosc: {e}")))?;
    let nbytes = layout.header.nbytes as usize;
    if nbytes != item.decoded_len {
        return Err(ReadError::ChunkSize {
            key: item.key.to_string(),
            expected: item.decoded_len,
            actual: nbytes,
        });
    }
    if layout.items.iter().any(|s| s.codec == Some(BloscCodec::BloscLz)) {
        let mut decoded = vec![0u8; nbytes];
        super::cpu::decode_into(bytes, &mut decoded).map_err(corrupt)?;
        return Ok(Some(Chunk::Decoded(decoded)));
    }
    for (k, stream) in layout.items.iter().enumerate() {
        check_stream(stream, &bytes[stream.src.clone()]).map_err(|e| corrupt(format!("blosc stream {k}: {e}")))?;
    }
    Ok(Some(Chunk::Streams(layout)))
}

/// What the host checks of a stream while it parses the chunk: zlib
/// streams need their header and trailer. (nvCOMP's LZ4 decoder does not
/// validate its input: untrusted LZ4 blocks are walked by the decode pass's
/// host check, while it stages them, against their exact sizes.)
fn check_stream(stream: &BloscItem, src: &[u8]) -> Result<(), String> {
    match stream.codec {
        Some(BloscCodec::Zlib) if src.len() < deflate::ZLIB_HEADER_LEN + deflate::ZLIB_TRAILER_LEN => {
            Err(format!("{} bytes is too short for a zlib stream", src.len()))
        }
        Some(BloscCodec::Zlib) => deflate::check_zlib_header(src),
        _ => Ok(()),
    }
}

/// The nvCOMP algorithm of a blosc compressor with a GPU decoder.
fn algorithm(codec: BloscCodec) -> Algorithm {
    match codec {
        BloscCodec::Lz4 => Algorithm::Lz4 {
            data_type: DataType::Char,
            has_header: false,
        },
        BloscCodec::Snappy => Algorithm::Snappy,
        BloscCodec::Zstd => Algorithm::Zstd,
        BloscCodec::Zlib => Algorithm::Deflate { algorithm: 0 },
        BloscCodec::BloscLz => unreachable!("blosclz chunks are decoded on the host"),
    }
}

/// Plans the decode of a wave whose chunks `prepare` made `chunks`, into an
/// output where missing chunks' places get `fill` (unless it is zero and
/// the output `zeroed`), each chunk widened by `scale_offset` where given.
fn plan_batch<'a>(
    wave: &[WaveItem<'a>],
    chunks: &'a [Option<Chunk>],
    (fill, zeroed): (&[u8], bool),
    scale_offset: Option<ScaleOffset>,
) -> BloscBatch<'a> {
    let mut batch = BloscBatch {
        scatter: Scatter {
            fill_value: fill.to_vec(),
            ..Scatter::default()
        },
        scale_offset,
        ..BloscBatch::default()
    };
    for (owner, (item, chunk)) in wave.iter().zip(chunks).enumerate() {
        let Some(chunk) = chunk else {
            if !(zeroed && fill_is_zero(fill)) {
                // Every row reads the fill value from its start.
                item.place.row_copies(|rows| {
                    batch.scatter.fills.push(RowCopy {
                        src_offset: 0,
                        src_pitch: 0,
                        ..rows
                    });
                });
            }
            continue;
        };
        let len = item.decoded_len;
        let base = grow(&mut batch.shuffled_len, len);
        let target = if scale_offset.is_none() && item.is_whole_run() {
            BlockTarget::Output(item.place.dst_offset)
        } else {
            let at = grow(&mut batch.unshuffled_len, len);
            // The rows read the chunk where it ends up: widened, or as it is.
            let source = match scale_offset {
                Some(widen) => {
                    let dst = grow(&mut batch.widened_len, widen.decoded_len(len));
                    batch.widen.push(WidenPlace { src: at, len, dst });
                    dst
                }
                None => at,
            };
            item.place.row_copies(|rows| {
                let rows = RowCopy {
                    src_offset: rows.src_offset + source,
                    ..rows
                };
                batch.scatter.copies.push((0, rows));
            });
            BlockTarget::Unshuffled(at)
        };
        batch.chunks.push((target, len));
        let stream = item.stream.expect("chunks are prepared from present items");
        match chunk {
            Chunk::Decoded(bytes) => {
                batch.stored.push((bytes, base));
                place_blocks(&mut batch.blocks, base, target, 0..len, None);
            }
            Chunk::Streams(layout) => {
                for s in &layout.items {
                    let dst = base + s.dst.start..base + s.dst.end;
                    match s.codec {
                        None => batch.stored.push((&stream[s.src.clone()], base + s.dst.start)),
                        Some(codec) => add_stream(&mut batch.batches, codec, &stream[s.src.clone()], dst, owner),
                    }
                }
                let mut done = 0;
                for u in &layout.unshuffles {
                    place_blocks(&mut batch.blocks, base, target, done..u.block.start, None);
                    place_blocks(&mut batch.blocks, base, target, u.block.clone(), Some(u));
                    done = u.block.end;
                }
                place_blocks(&mut batch.blocks, base, target, done..len, None);
            }
        }
    }
    batch.scatter.decoded_lens = vec![match scale_offset {
        Some(_) => batch.widened_len,
        None => batch.unshuffled_len,
    }];
    batch
}

/// Reserves `len` bytes at the end of a scratch of `end` bytes, aligned;
/// returns their offset.
fn grow(end: &mut usize, len: usize) -> usize {
    let at = end.next_multiple_of(ALIGN);
    *end = at + len;
    at
}

/// Adds the bytes `range` of a chunk at `base` of the shuffled scratch to
/// the unshuffle launch: unshuffled as `unshuffle` says, or copied.
fn place_blocks(
    blocks: &mut Vec<BlockPlace>,
    base: usize,
    target: BlockTarget,
    range: Range<usize>,
    unshuffle: Option<&blosc::Unshuffle>,
) {
    if range.is_empty() {
        return;
    }
    let dst = match target {
        BlockTarget::Output(at) => BlockTarget::Output(at + range.start),
        BlockTarget::Unshuffled(at) => BlockTarget::Unshuffled(at + range.start),
    };
    blocks.push(BlockPlace {
        src: base + range.start,
        dst,
        len: range.len(),
        typesize: unshuffle.map_or(1, |u| u.typesize),
        shuffle: unshuffle.map_or(Shuffle::None, |u| u.shuffle),
    });
}

/// Adds one compressed stream, decoding to `dst` of the shuffled scratch,
/// to the batch of its algorithm: zlib streams as raw DEFLATE, their
/// Adler-32 checked after decoding.
fn add_stream<'a>(
    batches: &mut Vec<StreamBatch<'a>>,
    codec: BloscCodec,
    src: &'a [u8],
    dst: Range<usize>,
    owner: usize,
) {
    let algorithm = algorithm(codec);
    let k = match batches.iter().position(|b| b.algorithm == algorithm) {
        Some(k) => k,
        None => {
            batches.push(StreamBatch {
                algorithm,
                inputs: Vec::new(),
                outputs: Vec::new(),
                adler32: Vec::new(),
                owners: Vec::new(),
            });
            batches.len() - 1
        }
    };
    let batch = &mut batches[k];
    let input = if codec == BloscCodec::Zlib {
        let stored = deflate::zlib_adler32(src).expect("checked by prepare");
        batch.adler32.push((batch.inputs.len(), stored));
        &src[deflate::ZLIB_HEADER_LEN..src.len() - deflate::ZLIB_TRAILER_LEN]
    } else {
        src
    };
    batch.inputs.push(input);
    batch.outputs.push(dst);
    batch.owners.push(owner);
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
