//! Which chunks a subset covers, whether each is covered whole, and where
//! its part of the subset comes from in the data: the reader's plan, with
//! every copy turned around (data to chunk instead of chunk to output).

use zarrs::array::{Array, ArraySubset};

use super::WriteError;
use crate::reader::{plan_chunks, BoxCopy, Selection};

/// One chunk of a write.
#[derive(Debug, Clone)]
pub(crate) struct ChunkWrite {
    /// Chunk grid indices.
    pub indices: Vec<u64>,
    /// Store key, for puts, deletes and errors.
    pub key: String,
    /// Bytes of the whole chunk (its full shape, also at the array's edge).
    pub chunk_len: usize,
    /// The chunk's full shape.
    pub chunk_shape: Vec<u64>,
    /// The copy of the chunk's part of the subset from the data into the chunk.
    pub gather: BoxCopy,
    /// The chunk's elements that lie inside the array, in chunk coordinates.
    pub in_bounds: ArraySubset,
    /// Whether the subset leaves part of the chunk's in-bounds elements out:
    /// their stored values must be read and merged.
    pub partial: bool,
    /// Whether the chunk reaches past the array's end, where it holds the
    /// fill value.
    pub overhangs: bool,
}

/// Plans the write of `subset` of `array` (elements of `elem` bytes) from
/// data of `data_len` bytes that holds exactly the subset, C order; a chunk
/// of more than `max_chunk_len` bytes is [`WriteError::ChunkTooLarge`]
/// (before anything is allocated).
pub(crate) fn plan<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    subset: &ArraySubset,
    (elem, data_len): (usize, usize),
    max_chunk_len: u64,
) -> Result<Vec<ChunkWrite>, WriteError> {
    let selection = Selection::from(subset);
    let shape = subset.shape().to_vec();
    let read_plan =
        plan_chunks(array, &selection, elem, data_len, Some(max_chunk_len)).map_err(WriteError::from_plan)?;
    let ones = vec![1; shape.len()];
    read_plan
        .chunks
        .into_iter()
        .map(|chunk| {
            let invalid = |e: zarrs::array::ArrayError| WriteError::InvalidSubset { source: e.into() };
            let chunk_shape: Vec<u64> = array
                .chunk_shape(&chunk.indices)
                .map_err(invalid)?
                .iter()
                .map(|n| n.get())
                .collect();
            let bounded = array.chunk_subset_bounded(&chunk.indices).map_err(invalid)?;
            let in_bounds = ArraySubset::new_with_shape(bounded.shape().to_vec());
            let local = &chunk.local_box;
            let gather = BoxCopy::strided(
                &shape,
                &chunk.dst_start,
                &ones,
                &chunk_shape,
                local.start(),
                local.shape(),
                elem,
            );
            let partial = local.start().iter().any(|s| *s != 0) || local.shape() != in_bounds.shape();
            let overhangs = in_bounds.shape() != chunk_shape.as_slice();
            Ok(ChunkWrite {
                indices: chunk.indices,
                key: chunk.key,
                chunk_len: chunk.decoded_len,
                chunk_shape,
                gather,
                in_bounds,
                partial,
                overhangs,
            })
        })
        .collect()
}

/// Splits `chunks` into waves of at most `wave_bytes` decoded bytes and
/// `max_items` encoded items (each chunk being `items` of them: its inner
/// chunks, for shards), at least one chunk each, in order: every item costs
/// memory while its wave is encoded, however small it is.
pub(crate) fn waves(
    chunks: Vec<ChunkWrite>,
    wave_bytes: usize,
    (items, max_items): (usize, usize),
) -> Vec<Vec<ChunkWrite>> {
    let mut waves = Vec::new();
    let mut current: Vec<ChunkWrite> = Vec::new();
    let mut bytes = 0;
    for chunk in chunks {
        let full = bytes + chunk.chunk_len > wave_bytes || (current.len() + 1).saturating_mul(items) > max_items;
        if !current.is_empty() && full {
            waves.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += chunk.chunk_len;
        current.push(chunk);
    }
    if !current.is_empty() {
        waves.push(current);
    }
    waves
}
