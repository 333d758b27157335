//! [`decode_stored_chunks_into`]: whole stored chunks of a chain the reader
//! batches, which the caller fetched itself (zarr-python's codec pipeline,
//! for stores the reader cannot open and for the inner chunks of shards),
//! decoded in one batch exactly as a read decodes them: the chain's framing
//! checked and removed ([`Framing`](crate::array::chain::framing::Framing): CRC-32C, the zlib header, the Adler-32
//! of the decoded bytes), each chunk's decoded size checked, by the reader's
//! wave decoders, each chunk into its own byte range of memory the caller
//! lends: on the GPU with one nvCOMP batch (blosc: one per algorithm and one
//! unshuffle launch, [`crate::blosc::plan`]), on the CPU in parallel.

use rayon::prelude::*;

use super::device::DeviceWaves;
use super::host::{HostOutput, HostWaves};
use super::output::Target;
use super::wave::{WaveCodec, WaveDecoder};
use super::{limits, ReadInto, ReadOptions};
use crate::array::chain::class::{BatchedCodec, ChainClass};
use crate::array::chain::Filters;
use crate::array::error::ReadError;
use crate::array::geometry::box_copy::BoxCopy;
use crate::array::wave_item::WaveItem;
use crate::cuda::DecodeOptions;

/// One stored chunk for [`decode_stored_chunks_into`].
#[derive(Debug, Clone, Copy)]
pub struct StoredChunk<'a> {
    /// Names the chunk in errors: its store key.
    pub key: &'a str,
    /// The chunk as stored, framing and checksums included.
    pub bytes: &'a [u8],
    /// Offset in the output of its decoded bytes.
    pub offset: usize,
    /// The bytes it must decode to; any other size is [`ReadError::ChunkSize`].
    pub decoded_len: usize,
}

/// Decodes every chunk of `chunks`, stored by the chain `chain` classifies
/// ([`classify_metadata`](super::classify_metadata)), into
/// `out[offset..offset + decoded_len]` and returns when they are all there;
/// bytes of `out` outside those ranges are left as they are. Of `options`,
/// the read's device, `trusted_input` and `max_decoded_size` apply. Host
/// memory is written by the CPU, device memory by its GPU, as in
/// [`read_chunks_parallel_into`](super::read_chunks_parallel_into).
///
/// The chain's byte swap and `delta` are undone in each chunk's decoded
/// bytes; the order of its dimensions is not (the caller views the bytes
/// through it).
///
/// Errors: [`ReadError::InvalidMetadata`] where the chain's stored chunks
/// do not decode in batches ([`ChainClass::decodes_stored`]); [`ReadError::InvalidOutput`] where a chunk's range lies
/// outside `out` or overlaps another's, before anything is decoded;
/// [`ReadError::Corrupt`] (a checksum or framing that does not hold, or an
/// undecodable stream), [`ReadError::ChunkSize`] (a chunk whose header
/// declares another size may be `Corrupt` on the CPU) and
/// [`ReadError::ChunkTooLarge`] naming the chunk at fault.
pub fn decode_stored_chunks_into(
    chain: &ChainClass,
    chunks: &[StoredChunk<'_>],
    options: &ReadOptions,
    out: ReadInto<'_>,
) -> Result<(), ReadError> {
    let codec = match &chain.codec {
        Ok(BatchedCodec::Algorithm(algorithm)) if chain.decodes_stored() => WaveCodec::Algorithm(*algorithm),
        Ok(BatchedCodec::Blosc(_)) if chain.decodes_stored() => WaveCodec::Blosc,
        Ok(_) => return Err(not_stored("shards and fixedscaleoffset are read by the reader alone")),
        Err(reason) => return Err(not_stored(reason)),
    };
    let (target, len) = match out {
        ReadInto::Host(bytes) => {
            let len = bytes.len();
            // SAFETY: `bytes` is borrowed for this call, and every wave is
            // decoded before it returns.
            (Target::Host(unsafe { HostOutput::lent(bytes) }), len)
        }
        ReadInto::Device(lent) => (Target::Device(lent.region()), lent.region().len),
    };
    let engine = target.engine(options.device)?;
    target.check(engine.as_deref(), len)?;
    check_places(chunks, len)?;
    let max_decoded_size = limits::max_decoded_size(options, engine.as_deref());
    if let Some(chunk) = chunks.iter().find(|c| c.decoded_len as u64 > max_decoded_size) {
        return Err(ReadError::ChunkTooLarge {
            key: chunk.key.to_string(),
            size: chunk.decoded_len as u64,
            limit: max_decoded_size,
        });
    }
    let places: Vec<BoxCopy> = chunks
        .iter()
        .map(|c| BoxCopy {
            src_offset: 0,
            dst_offset: c.offset,
            width: c.decoded_len,
            outer: Vec::new(),
        })
        .collect();
    // Checked in parallel: CRC-32C sums read every byte.
    let wave: Vec<WaveItem<'_>> = crate::pool::collect_in_order(
        chunks
            .par_iter()
            .zip(&places)
            .map(|(c, place)| chain.framing.item(c.key, Some(c.bytes), c.decoded_len, place)),
    )?;
    // Every item is present: no fill value is ever written.
    let no_fill = Vec::new();
    // The order of the dimensions is the caller's view: only the element
    // filters are undone here.
    let filters = Filters {
        elements: chain.elements,
        ..Filters::default()
    };
    let shape = [len as u64];
    match engine {
        None => {
            let decoder =
                HostWaves::new(codec, max_decoded_size, target.into_host(&shape, len)?, no_fill)?.with_filters(filters);
            crate::pool::in_pool(|| decoder.decode_wave(&wave))
        }
        Some(engine) => {
            let decode = DecodeOptions {
                max_decoded_size,
                trusted: options.trusted_input,
            };
            let out = target.into_device(engine, &shape, len)?;
            let decoder = DeviceWaves::new(codec, decode, out, no_fill).with_filters(filters);
            crate::pool::in_pool(|| decoder.decode_wave(&wave))
        }
    }
}

/// The error for a chain whose stored chunks do not decode here, and why.
fn not_stored(reason: &str) -> ReadError {
    ReadError::InvalidMetadata {
        field: "codecs".to_string(),
        reason: format!("stored chunks of this chain are not decoded in batches: {reason}"),
    }
}

/// Checks that every chunk's range lies within an output of `len` bytes and
/// overlaps no other: the decoders write them in parallel.
fn check_places(chunks: &[StoredChunk<'_>], len: usize) -> Result<(), ReadError> {
    let invalid = |reason: String| ReadError::InvalidOutput { reason };
    let mut ranges = Vec::with_capacity(chunks.len());
    for c in chunks {
        let end = c
            .offset
            .checked_add(c.decoded_len)
            .filter(|end| *end <= len)
            .ok_or_else(|| {
                invalid(format!(
                    "chunk {} decodes to {} bytes at {}, past the output's {len} bytes",
                    c.key, c.decoded_len, c.offset
                ))
            })?;
        ranges.push((c.offset, end, c.key));
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end, first), (start, _, second)) = (pair[0], pair[1]);
        if start < end {
            return Err(invalid(format!("the places of chunks {first} and {second} overlap")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use zarrs::array::codec::bytes_to_bytes::blosc::{
        blosc_compress_bytes, BloscCompressionLevel, BloscCompressor, BloscShuffleMode,
    };

    use super::*;
    use crate::codec::Backend;

    /// `data` as c-blosc encodes it, byte-shuffled.
    fn blosc(data: &[u8], compressor: BloscCompressor, typesize: usize) -> Vec<u8> {
        let level = BloscCompressionLevel::try_from(5).unwrap();
        blosc_compress_bytes(data, level, BloscShuffleMode::Shuffle, typesize, compressor, 0, 1).unwrap()
    }

    /// The class of a v3 chain: `codecs` (each after a comma) after `bytes`.
    fn chain(codecs: &str) -> ChainClass {
        let metadata = format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [100], "data_type": "uint8",
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [100]}}}},
            "chunk_key_encoding": {{"name": "default"}}, "fill_value": 0,
            "codecs": [{{"name": "bytes"}}{codecs}]}}"#
        );
        super::super::classify_metadata(&metadata).unwrap()
    }

    fn blosc_chain() -> ChainClass {
        chain(
            r#", {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 1, "blocksize": 0}}"#,
        )
    }

    fn cpu() -> ReadOptions {
        ReadOptions {
            device: Backend::Cpu,
            ..ReadOptions::default()
        }
    }

    #[test]
    fn chunks_decode_into_their_places_and_nothing_else() {
        let a: Vec<u8> = (0..4000u32).flat_map(|i| (i * 7).to_le_bytes()).collect();
        let b: Vec<u8> = (0..300u16).flat_map(|i| (i ^ 0x5a5a).to_le_bytes()).collect();
        let (sa, sb) = (blosc(&a, BloscCompressor::Zstd, 4), blosc(&b, BloscCompressor::LZ4, 2));
        let mut out = vec![0xEEu8; 16_640 + b.len() + 3];
        let chunks = [
            StoredChunk {
                key: "c/1",
                bytes: &sb,
                offset: 16_640,
                decoded_len: b.len(),
            },
            StoredChunk {
                key: "c/0",
                bytes: &sa,
                offset: 0,
                decoded_len: a.len(),
            },
        ];
        decode_stored_chunks_into(&blosc_chain(), &chunks, &cpu(), ReadInto::Host(&mut out)).unwrap();
        assert_eq!(&out[..a.len()], &a[..]);
        assert!(out[a.len()..16_640].iter().all(|x| *x == 0xEE));
        assert_eq!(&out[16_640..16_640 + b.len()], &b[..]);
        assert_eq!(&out[16_640 + b.len()..], [0xEE; 3]);
    }

    #[test]
    fn bad_places_and_chunks_are_errors_naming_the_chunk() {
        let a = vec![3u8; 100];
        let stored = blosc(&a, BloscCompressor::LZ4, 1);
        let chunk = |key, offset, decoded_len| StoredChunk {
            key,
            bytes: &stored,
            offset,
            decoded_len,
        };
        let mut out = vec![0u8; 150];
        let run = |chunks: &[StoredChunk<'_>], out: &mut [u8]| {
            decode_stored_chunks_into(&blosc_chain(), chunks, &cpu(), ReadInto::Host(out)).unwrap_err()
        };
        match run(&[chunk("c/0", 0, 100), chunk("c/1", 99, 100)], &mut out) {
            ReadError::InvalidOutput { reason } => assert!(reason.contains("c/1"), "{reason}"),
            other => panic!("{other:?}"),
        }
        match run(&[chunk("c/0", 0, 100), chunk("c/1", 40, 100)], &mut vec![0u8; 400]) {
            ReadError::InvalidOutput { reason } => {
                assert!(reason.contains("c/0 and c/1 overlap"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // The CPU reads the size the header declares as a corrupt chunk.
        let wrong_size = run(&[chunk("c/2", 0, 99)], &mut out);
        assert!(
            matches!(&wrong_size, ReadError::Corrupt { key, reason } if key == "c/2" && reason.contains("100")),
            "{wrong_size:?}"
        );
        let mut broken = stored.clone();
        broken.truncate(broken.len() - 1);
        let truncated = StoredChunk {
            bytes: &broken,
            ..chunk("c/3", 0, 100)
        };
        assert!(matches!(run(&[truncated], &mut out), ReadError::Corrupt { key, .. } if key == "c/3"));
        let small = ReadOptions {
            max_decoded_size: Some(64),
            ..cpu()
        };
        match decode_stored_chunks_into(
            &blosc_chain(),
            &[chunk("c/4", 0, 100)],
            &small,
            ReadInto::Host(&mut out),
        ) {
            Err(ReadError::ChunkTooLarge {
                key,
                size: 100,
                limit: 64,
            }) => assert_eq!(key, "c/4"),
            other => panic!("{other:?}"),
        }
    }

    /// Framed chains are checked as a read checks them: the CRC-32C and
    /// the zlib header and Adler-32, each mismatch `Corrupt` naming the chunk.
    #[test]
    fn framing_is_checked_and_removed_as_in_a_read() {
        let data: Vec<u8> = (0..100u8).map(|i| i / 3).collect();
        let decode = |chain: &ChainClass, stored: &[u8]| {
            let mut out = vec![0u8; 100];
            let chunk = StoredChunk {
                key: "c/0",
                bytes: stored,
                offset: 0,
                decoded_len: 100,
            };
            decode_stored_chunks_into(chain, &[chunk], &cpu(), ReadInto::Host(&mut out)).map(|()| out)
        };
        let corrupt = |result: Result<Vec<u8>, ReadError>, what: &str| match result {
            Err(ReadError::Corrupt { key, reason }) => {
                assert_eq!(key, "c/0");
                assert!(reason.contains(what), "{reason}");
            }
            other => panic!("{other:?}"),
        };
        let zstd = chain(r#", {"name": "zstd", "configuration": {"level": 1, "checksum": false}}, {"name": "crc32c"}"#);
        let mut stored = ::zstd::bulk::compress(&data, 1).unwrap();
        stored.extend(crc32c::crc32c(&stored).to_le_bytes());
        assert_eq!(decode(&zstd, &stored).unwrap(), data);
        let mut flipped = stored.clone();
        *flipped.last_mut().unwrap() ^= 1;
        corrupt(decode(&zstd, &flipped), "crc32c mismatch");
        corrupt(decode(&zstd, &stored[..3]), "shorter than the 4-byte crc32c");

        let zlib = chain(r#", {"name": "numcodecs.zlib", "configuration": {"level": 1}}"#);
        let mut stored = vec![0x78, 0x01];
        stored.extend(miniz_oxide::deflate::compress_to_vec(&data, 1));
        stored.extend(simd_adler32::adler32(&data.as_slice()).to_be_bytes());
        assert_eq!(decode(&zlib, &stored).unwrap(), data);
        let mut wrong_sum = stored.clone();
        *wrong_sum.last_mut().unwrap() ^= 1;
        corrupt(decode(&zlib, &wrong_sum), "zlib Adler-32 mismatch");
        let mut wrong_header = stored.clone();
        wrong_header[1] ^= 1;
        corrupt(decode(&zlib, &wrong_header), "zlib");

        match decode(&chain(""), &data) {
            Err(ReadError::InvalidMetadata { field, reason }) => {
                assert_eq!(field, "codecs");
                assert!(reason.contains("not decoded in batches"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
