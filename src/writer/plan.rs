//! Which chunks a subset covers, whether each is covered whole, and where
//! its part of the subset comes from in the data: the reader's plan, with
//! every copy turned around (data to chunk instead of chunk to output).
//! Like reads, writes plan their chunks in batches
//! ([`Planner::batches`]), drawn wave by wave, so that a write of millions
//! of tiny chunks holds the plan of one batch at a time.

use zarrs::array::{Array, ArraySubset};

use super::WriteError;
use crate::array::geometry::box_copy::BoxCopy;
use crate::array::geometry::plan::{ChunkPlan, Planner, PLAN_BATCH_CHUNKS};
use crate::array::geometry::selection::Selection;

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

/// The chunks of the write of a subset, planned a batch at a time.
pub(crate) struct WritePlanner<'a, S: ?Sized> {
    array: &'a Array<S>,
    planner: Planner<'a, S>,
    /// The subset's shape, which the data has.
    shape: Vec<u64>,
    elem: usize,
}

impl<'a, S: ?Sized + Send + Sync> WritePlanner<'a, S> {
    /// Plans the write of `subset` of `array` (elements of `elem` bytes)
    /// from data of `data_len` bytes that holds exactly the subset, C order;
    /// a chunk of more than `max_chunk_len` bytes is
    /// [`WriteError::ChunkTooLarge`], found here (before anything is
    /// allocated or stored).
    pub(crate) fn new(
        array: &'a Array<S>,
        subset: &ArraySubset,
        (elem, data_len): (usize, usize),
        max_chunk_len: u64,
    ) -> Result<Self, WriteError> {
        let selection = Selection::from(subset);
        let planner = Planner::new(array, &selection, (elem, None), data_len, Some(max_chunk_len))
            .map_err(WriteError::from_plan)?;
        planner.check_largest().map_err(WriteError::from_plan)?;
        Ok(Self {
            array,
            planner,
            shape: subset.shape().to_vec(),
            elem,
        })
    }

    /// Bytes of the first chunk (1 where no chunk is written).
    pub(crate) fn first_chunk_len(&self) -> Result<usize, WriteError> {
        let first = self.planner.first().map_err(WriteError::from_plan)?;
        Ok(first.chunks.first().map_or(1, |c| c.decoded_len))
    }

    /// The chunks, in order, planned a batch at a time.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = Result<ChunkWrite, WriteError>> + Send + '_ {
        self.planner.batches().flat_map(move |batch| {
            let planned: Result<Vec<ChunkWrite>, WriteError> = batch
                .map_err(WriteError::from_plan)
                .and_then(|plan| plan.chunks.into_iter().map(|chunk| self.chunk(chunk)).collect());
            match planned {
                Ok(chunks) => chunks.into_iter().map(Ok).collect::<Vec<_>>(),
                Err(err) => vec![Err(err)],
            }
        })
    }

    /// The write of one chunk of the reader's plan.
    fn chunk(&self, chunk: ChunkPlan) -> Result<ChunkWrite, WriteError> {
        let invalid = |e: zarrs::array::ArrayError| WriteError::InvalidSubset { source: e.into() };
        let chunk_shape: Vec<u64> = self
            .array
            .chunk_shape(&chunk.indices)
            .map_err(invalid)?
            .iter()
            .map(|n| n.get())
            .collect();
        let bounded = self.array.chunk_subset_bounded(&chunk.indices).map_err(invalid)?;
        let in_bounds = ArraySubset::new_with_shape(bounded.shape().to_vec());
        let local = &chunk.local_box;
        let ones = vec![1; self.shape.len()];
        let gather = BoxCopy::strided(
            &self.shape,
            &chunk.dst_start,
            &ones,
            &chunk_shape,
            local.start(),
            local.shape(),
            self.elem,
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
    }
}

/// Groups chunks into waves of at most `wave_bytes` decoded bytes,
/// `max_items` encoded items (each chunk being `items` of them: its inner
/// chunks, for shards) and [`PLAN_BATCH_CHUNKS`] chunks, at least one chunk
/// each, in order: every item and every chunk's plan costs memory while its
/// wave is encoded, however small it is. The chunks are
/// drawn as the waves are, so only the plan of the batch being drawn from
/// is held; a planning error ends the waves.
pub(crate) struct Waves<I> {
    chunks: I,
    /// The chunk that did not fit the last wave.
    carried: Option<ChunkWrite>,
    wave_bytes: usize,
    items: usize,
    max_items: usize,
}

/// The [`Waves`] of `chunks`.
pub(crate) fn waves<I>(chunks: I, wave_bytes: usize, (items, max_items): (usize, usize)) -> Waves<I> {
    Waves {
        chunks,
        carried: None,
        wave_bytes,
        items,
        max_items,
    }
}

impl<I: Iterator<Item = Result<ChunkWrite, WriteError>>> Iterator for Waves<I> {
    type Item = Result<Vec<ChunkWrite>, WriteError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut current: Vec<ChunkWrite> = Vec::new();
        let mut bytes = 0;
        let mut next = self.carried.take().map(Ok);
        while let Some(chunk) = next.or_else(|| self.chunks.next()) {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(err) => return Some(Err(err)),
            };
            let chunks = current.len() + 1;
            let full = bytes + chunk.chunk_len > self.wave_bytes
                || chunks.saturating_mul(self.items) > self.max_items
                || chunks as u64 > PLAN_BATCH_CHUNKS;
            if !current.is_empty() && full {
                self.carried = Some(chunk);
                return Some(Ok(current));
            }
            bytes += chunk.chunk_len;
            current.push(chunk);
            next = None;
        }
        (!current.is_empty()).then_some(Ok(current))
    }
}
