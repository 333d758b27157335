//! Batched encoding of a wave's chunks into the bytes to store: one engine
//! call per wave (one nvCOMP batch on the GPU, or the CPU backend in
//! parallel), then each chunk's framing.
//!
//! | chain | stored chunk |
//! |---|---|
//! | `nvcomp_batch`, `zstd`, `gzip`, numcodecs `lz4` | the algorithm's buffer |
//! | numcodecs `zlib` | `78 01`, the raw DEFLATE stream, the Adler-32 of the chunk (big endian) |
//! | any of these, then `crc32c` | the above, then its CRC-32C (little endian) |
//!
//! Compression levels in the metadata are not applied: the bitstream is the
//! same format at any level, and each backend compresses at its own (the
//! CPU's Zstandard at level 1, nvCOMP's at its default).
//!
//! Chunks equal to the fill value are found before encoding, and not
//! encoded: on the host, or for device chunks on the device
//! ([`super::gather::device_fill_chunks`]).

use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;

use super::gather::{device_fill_chunks, is_fill};
use super::WriteError;
use crate::array::chain::class::{BatchedCodec, ChainClass};
use crate::array::chain::FastChain;
use crate::cuda::{CudaEngine, DeviceRegion};
use crate::{Backend, BatchCodec};

/// Encodes chunks with one chain on one backend.
#[derive(Debug, Clone)]
pub(crate) struct ChunkEncoder {
    chain: FastChain,
    codec: BatchCodec,
}

/// What becomes of one chunk of a wave.
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    /// Put these bytes.
    Put(Bytes),
    /// The chunk holds only the fill value: delete any stored one.
    Fill,
}

impl ChunkEncoder {
    /// An encoder for `chain` on the CPU (`engine` `None`) or the GPU.
    pub(super) fn new(chain: FastChain, engine: Option<&Arc<CudaEngine>>) -> Result<Self, WriteError> {
        let backend = match engine {
            Some(engine) => Backend::Cuda {
                device: engine.device(),
            },
            None => Backend::Cpu,
        };
        let codec = BatchCodec::new(chain.algorithm, backend)?;
        Ok(Self { chain, codec })
    }

    /// Encodes the host chunks that are not all `fill` (unless
    /// `write_fill`), in one batch call.
    pub(super) fn encode_host(
        &self,
        chunks: &[Vec<u8>],
        fill: &[u8],
        write_fill: bool,
    ) -> Result<Vec<Stored>, WriteError> {
        let keep: Vec<bool> = chunks.par_iter().map(|c| write_fill || !is_fill(c, fill)).collect();
        let inputs: Vec<&[u8]> = chunks
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c.as_slice())
            .collect();
        let batch = self.codec.encode_batch(&inputs)?;
        let (data, offsets) = batch.into_parts();
        let whole = Bytes::from(data);
        let encoded = offsets.windows(2).map(|w| whole.slice(w[0]..w[1]));
        Ok(self.framed(interleave(&keep, encoded), |i| chunks[i].as_slice()))
    }

    /// Encodes device chunks (regions of a staging allocation) in one
    /// nvCOMP batch and copies the results to the host in one transfer.
    pub(super) fn encode_device(
        &self,
        engine: &CudaEngine,
        regions: &[DeviceRegion],
        fill: &[u8],
        write_fill: bool,
    ) -> Result<Vec<Stored>, WriteError> {
        // Each phase below returns after its device work: no wait to time it.
        let mut profile = crate::profile::Profile::new(|| {});
        let keep: Vec<bool> = match write_fill {
            true => vec![true; regions.len()],
            false => device_fill_chunks(engine, regions, fill)?
                .into_iter()
                .map(|f| !f)
                .collect(),
        };
        let kept: Vec<DeviceRegion> = regions
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(r, _)| *r)
            .collect();
        profile.mark("fill check");
        let encoded = match kept.is_empty() {
            true => Vec::new(),
            false => {
                // SAFETY: the regions are slots of a staging allocation the
                // caller keeps alive and unwritten during the call.
                let batch = unsafe { engine.encode_device(&self.codec.algorithm().clone(), &kept) }?;
                profile.mark("writer encode");
                let encoded = engine.download_batch(&batch)?;
                profile.mark("download");
                encoded
            }
        };
        let stored = interleave(&keep, encoded.into_iter());
        // Device chains never need the decoded bytes for their framing (zlib
        // goes through the host, see `needs_host_bytes`).
        Ok(self.framed(stored, |_| &[]))
    }

    /// Whether the framing needs each chunk's decoded bytes on the host
    /// (zlib's Adler-32), so device chunks are encoded from the host.
    pub(super) fn needs_host_bytes(&self) -> bool {
        self.chain.framing.adler32
    }

    /// Each stored chunk with the chain's framing; `decoded(i)` is chunk
    /// `i`'s decoded bytes (read only for zlib).
    fn framed<'a>(&self, stored: Vec<Stored>, decoded: impl Fn(usize) -> &'a [u8] + Sync) -> Vec<Stored> {
        let framing = self.chain.framing;
        if !framing.crc32c && !framing.adler32 {
            return stored;
        }
        stored
            .into_par_iter()
            .enumerate()
            .map(|(i, s)| match s {
                Stored::Fill => Stored::Fill,
                Stored::Put(payload) => Stored::Put(Bytes::from(framing.frame(&payload, decoded(i)))),
            })
            .collect()
    }
}

/// Encodes `chunks` (each a chunk's bytes in its stored order) of the chain
/// `chain` classifies ([`classify_metadata`](crate::reader::classify_metadata)) in one batch on the CPU, in
/// parallel, each framed as the chain stores it: the chunks
/// [`decode_stored_chunks_into`](crate::reader::decode_stored_chunks_into) decodes. The levels as in
/// the module doc. [`Error::InvalidConfig`](crate::Error::InvalidConfig) where the chain does not
/// encode in batches ([`ChainClass::encodes_stored`]).
pub fn encode_stored_chunks(chain: &ChainClass, chunks: &[&[u8]]) -> crate::Result<Vec<Vec<u8>>> {
    let algorithm = match &chain.codec {
        Ok(BatchedCodec::Algorithm(algorithm)) if chain.encodes_stored() => *algorithm,
        Ok(codec) => {
            return Err(crate::Error::InvalidConfig(format!(
                "chunks of a {} chain with filters, shards or blosc are not encoded in batches",
                codec.name()
            )))
        }
        Err(reason) => {
            return Err(crate::Error::InvalidConfig(format!(
                "chunks of this chain are not encoded in batches: {reason}"
            )))
        }
    };
    let encoded = BatchCodec::new(algorithm, Backend::Cpu)?.encode_batch(chunks)?;
    Ok(crate::pool::in_pool(|| {
        (0..chunks.len())
            .into_par_iter()
            .map(|i| chain.framing.frame(encoded.get(i), chunks[i]))
            .collect()
    }))
}

/// What becomes of each chunk: `Fill` where `keep` is false, else the next
/// of `encoded` (one per kept chunk, in order).
fn interleave(keep: &[bool], mut encoded: impl Iterator<Item = Bytes>) -> Vec<Stored> {
    keep.iter()
        .map(|keep| match keep {
            true => Stored::Put(encoded.next().expect("one encoded buffer per kept chunk")),
            false => Stored::Fill,
        })
        .collect()
}
