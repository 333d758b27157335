//! Which chunks a subset touches, and where each chunk's part of the subset
//! goes in the output: one strided box copy per chunk. Reads plan their
//! chunks in batches of [`PLAN_BATCH_CHUNKS`], so a read of millions of
//! tiny chunks holds the plan of one batch at a time; every chunk's size
//! is checked arithmetic on the metadata's shape.

use rayon::prelude::*;
use zarrs::array::{Array, ArraySubset};

use super::box_copy::c_strides;
pub(crate) use super::box_copy::BoxCopy;
use super::selection::{Selection, StridedRange};
use super::{BoxedSource, ReadError};

/// One chunk of a read.
#[derive(Debug, Clone)]
pub(crate) struct ChunkPlan {
    /// Chunk grid indices.
    pub indices: Vec<u64>,
    /// Store key, for fetching and for errors.
    pub key: String,
    /// Bytes the chunk decodes to (its full, unbounded shape).
    pub decoded_len: usize,
    /// The copy from the decoded chunk into the output.
    pub copy: BoxCopy,
    /// The chunk-local box that holds the chunk's selected elements.
    pub local_box: ArraySubset,
    /// Where the chunk's first selected element goes in the output.
    pub dst_start: Vec<u64>,
}

/// Chunks of a read (all of them, or a batch) and the output they fill.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Shape of the output (the selection's).
    pub shape: Vec<u64>,
    /// The selection's step per dimension.
    pub steps: Vec<u64>,
    /// The chunks, each holding a selected element.
    pub chunks: Vec<ChunkPlan>,
}

impl Plan {
    /// The copy of `chunk`'s selected elements from a source that holds
    /// exactly its [`ChunkPlan::local_box`] (C order) into the output.
    pub(crate) fn copy_from_box(&self, chunk: &ChunkPlan, elem: usize) -> BoxCopy {
        let shape = chunk.local_box.shape();
        let counts: Vec<u64> = shape.iter().zip(&self.steps).map(|(n, s)| (n - 1) / s + 1).collect();
        BoxCopy::strided(
            shape,
            &vec![0; shape.len()],
            &self.steps,
            &self.shape,
            &chunk.dst_start,
            &counts,
            elem,
        )
    }
}

/// The part of one dimension's selection that lies in one chunk.
#[derive(Debug, Clone, Copy)]
struct DimPart {
    /// The chunk's index along the dimension.
    chunk: u64,
    /// The chunk's length along the dimension.
    chunk_len: u64,
    /// The first selected index, relative to the chunk's start.
    local_start: u64,
    /// Selected indices in the chunk.
    count: u64,
    /// Output index of the first selected index.
    dst_start: u64,
}

/// The chunks along dimension `d` that hold indices of `sel`: one entry per
/// such chunk, found by jumping from chunk to chunk (never per index).
fn dim_parts<S: ?Sized>(array: &Array<S>, d: usize, sel: &StridedRange) -> Result<Vec<DimPart>, ReadError> {
    let invalid = |source: BoxedSource| ReadError::InvalidSubset { source };
    let (total, n) = (sel.count(), array.dimensionality());
    let mut parts = Vec::new();
    let mut point = vec![0u64; n];
    let mut done = 0u64;
    while done < total {
        let index = sel.start + done * sel.step;
        point[d] = index;
        let chunk = array
            .chunk_grid()
            .chunk_indices(&point)
            .map_err(|e| invalid(e.into()))?
            .ok_or_else(|| invalid(format!("index {index} of dimension {d} is in no chunk").into()))?;
        let subset = array.chunk_subset(&chunk).map_err(|e| invalid(e.into()))?;
        let (chunk_start, chunk_len) = (subset.start()[d], subset.shape()[d]);
        let local_start = index - chunk_start;
        let count = ((chunk_len - local_start - 1) / sel.step + 1).min(total - done);
        parts.push(DimPart {
            chunk: chunk[d],
            chunk_len,
            local_start,
            count,
            dst_start: done,
        });
        done += count;
    }
    Ok(parts)
}

/// Most chunks planned at once: a read of more chunks plans and reads
/// them in batches of this many (in C order of the chunk grid), so that its
/// plan costs memory (about 600 bytes a chunk: key, indices, boxes) in
/// proportion to a batch, not to the read. A batch of 32,768 chunks of
/// 64 KiB is 2 GiB of output, many waves: the pause between batches (the
/// last wave of one drains before the next is fetched) is rare.
pub(crate) const PLAN_BATCH_CHUNKS: u64 = 1 << 15;

/// The chunks that hold selected elements, found dimension by dimension
/// (one entry per chunk along each dimension, never per index), and planned
/// in batches ([`Planner::batches`]).
pub(crate) struct Planner<'a, S: ?Sized> {
    array: &'a Array<S>,
    /// The selection's parts along each dimension.
    parts: Vec<Vec<DimPart>>,
    shape: Vec<u64>,
    steps: Vec<u64>,
    out_len: usize,
    elem: usize,
    /// The dimension order of the decoded chunks (`None`: C order).
    order: Option<&'a [usize]>,
    max_decoded_size: Option<u64>,
    /// Chunks in all: the product of the parts' counts.
    count: u64,
}

impl<'a, S: ?Sized + Send + Sync> Planner<'a, S> {
    /// The planner of the read of `selection` from `array`, whose chunks
    /// decode to elements of `elem` bytes with their dimensions in `order`
    /// (`None`: C order; see [`super::transpose`]). `out_len` is the
    /// output's size in bytes, checked by the caller; chunks that decode to
    /// more than `max_decoded_size` (when given) are errors.
    pub(crate) fn new(
        array: &'a Array<S>,
        selection: &Selection,
        (elem, order): (usize, Option<&'a [usize]>),
        out_len: usize,
        max_decoded_size: Option<u64>,
    ) -> Result<Self, ReadError> {
        super::limits::check_dimensionality(array.dimensionality())?;
        selection
            .check_within(array.shape())
            .map_err(|reason| ReadError::InvalidSubset { source: reason.into() })?;
        let parts = match out_len {
            0 => Vec::new(),
            _ => selection
                .dims()
                .iter()
                .enumerate()
                .map(|(d, sel)| dim_parts(array, d, sel))
                .collect::<Result<Vec<_>, _>>()?,
        };
        // Each part holds a selected index: the count is at most the
        // output's elements.
        let count = match out_len {
            0 => 0,
            _ => parts.iter().fold(1u64, |n, p| n.saturating_mul(p.len() as u64)),
        };
        Ok(Self {
            array,
            parts,
            shape: selection.shape(),
            steps: selection.dims().iter().map(|d| d.step).collect(),
            out_len,
            elem,
            order,
            max_decoded_size,
            count,
        })
    }

    /// Bytes of the output.
    pub(crate) fn out_len(&self) -> usize {
        self.out_len
    }

    /// The plan of the first chunk (none where no chunk is read).
    pub(crate) fn first(&self) -> Result<Plan, ReadError> {
        self.plan(0..self.count.min(1))
    }

    /// Checks the largest chunk (the longest part along each dimension,
    /// the first of equals), so that every chunk's size is known to be
    /// valid before any batch is planned: a write refuses a chunk too large
    /// before it stores anything.
    pub(crate) fn check_largest(&self) -> Result<(), ReadError> {
        let largest = self.parts.iter().map(|parts| {
            let longer = |a: DimPart, b: DimPart| if b.chunk_len > a.chunk_len { b } else { a };
            parts.iter().copied().reduce(longer)
        });
        // No part along some dimension: no chunk is read.
        let (Some(largest), true) = (largest.collect::<Option<Vec<_>>>(), self.count > 0) else {
            return Ok(());
        };
        self.chunk(&largest).map(drop)
    }

    /// The plan of the chunk where `parts` (one per dimension) meet.
    fn chunk(&self, parts: &[DimPart]) -> Result<ChunkPlan, ReadError> {
        chunk_plan(
            self.array,
            parts,
            (&self.steps, &self.shape),
            (self.elem, self.order),
            self.max_decoded_size,
        )
    }

    /// Plans of at most [`PLAN_BATCH_CHUNKS`] chunks each, in order, that
    /// together plan every chunk; none where no chunk is read.
    pub(crate) fn batches(&self) -> impl Iterator<Item = Result<Plan, ReadError>> + '_ {
        (0..self.count.div_ceil(PLAN_BATCH_CHUNKS)).map(|b| {
            let start = b * PLAN_BATCH_CHUNKS;
            self.plan(start..self.count.min(start + PLAN_BATCH_CHUNKS))
        })
    }

    /// The plan of the chunks `range` (C order of the parts, innermost
    /// dimension fastest).
    fn plan(&self, range: std::ops::Range<u64>) -> Result<Plan, ReadError> {
        // In parallel: a chunk's plan costs about a microsecond (its key,
        // boxes and copy), which for the 16,384 inner chunks of a GiB in
        // 64 KiB chunks took 14-23 ms of a 90 ms read on the H200's host.
        // Indices below the count, at most the output's elements: usize.
        let range = range.start as usize..range.end as usize;
        let chunks = crate::fork::in_pool(|| {
            range
                .into_par_iter()
                .map(|k| self.chunk(&self.meeting(k as u64)))
                .collect::<Result<Vec<_>, _>>()
        })?;
        Ok(Plan {
            shape: self.shape.clone(),
            steps: self.steps.clone(),
            chunks,
        })
    }

    /// The parts of chunk `k` (C order of the parts) along each dimension.
    fn meeting(&self, mut k: u64) -> Vec<DimPart> {
        let mut meeting: Vec<DimPart> = self
            .parts
            .iter()
            .rev()
            .map(|parts| {
                let n = parts.len() as u64;
                let part = parts[(k % n) as usize];
                k /= n;
                part
            })
            .collect();
        meeting.reverse();
        meeting
    }
}

/// The plan of the chunk where the per-dimension `parts` meet.
fn chunk_plan<S: ?Sized>(
    array: &Array<S>,
    parts: &[DimPart],
    (steps, out_shape): (&[u64], &[u64]),
    (elem, order): (usize, Option<&[usize]>),
    max_decoded_size: Option<u64>,
) -> Result<ChunkPlan, ReadError> {
    let indices: Vec<u64> = parts.iter().map(|p| p.chunk).collect();
    let key = array.chunk_key(&indices).to_string();
    let chunk_shape: Vec<u64> = parts.iter().map(|p| p.chunk_len).collect();
    let decoded = super::limits::chunk_bytes(&chunk_shape, elem).ok_or_else(|| ReadError::InvalidMetadata {
        field: "chunk_shape".into(),
        reason: format!(
            "chunk {key} of shape {chunk_shape:?} and {elem}-byte elements has more bytes than 64 bits count"
        ),
    })?;
    if let Some(limit) = max_decoded_size.filter(|limit| decoded > *limit) {
        return Err(ReadError::ChunkTooLarge {
            key,
            size: decoded,
            limit,
        });
    }
    let decoded_len = usize::try_from(decoded).map_err(|_| ReadError::ChunkTooLarge {
        key: key.clone(),
        size: decoded,
        limit: usize::MAX as u64,
    })?;
    let local_start: Vec<u64> = parts.iter().map(|p| p.local_start).collect();
    let counts: Vec<u64> = parts.iter().map(|p| p.count).collect();
    let dst_start: Vec<u64> = parts.iter().map(|p| p.dst_start).collect();
    let box_shape: Vec<u64> = counts.iter().zip(steps).map(|(c, s)| (c - 1) * s + 1).collect();
    let src_strides = match order {
        Some(order) => super::transpose::stored_strides(&chunk_shape, order, elem),
        None => c_strides(&chunk_shape, elem),
    };
    let copy = BoxCopy::strided_from(&src_strides, &local_start, steps, out_shape, &dst_start, &counts, elem);
    let local_box = ArraySubset::new_with_start_shape(local_start, box_shape)
        .map_err(|e| ReadError::InvalidSubset { source: e.into() })?;
    Ok(ChunkPlan {
        indices,
        key,
        decoded_len,
        copy,
        local_box,
        dst_start,
    })
}
