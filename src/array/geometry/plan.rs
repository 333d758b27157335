//! Which chunks a subset touches, and where each chunk's part of the subset
//! goes in the output: one strided box copy per chunk. Reads plan their
//! chunks in batches of [`PLAN_BATCH_CHUNKS`], so a read of millions of
//! tiny chunks holds the plan of one batch at a time; every chunk's size
//! is checked arithmetic on the metadata's shape.

use rayon::prelude::*;
use zarrs::array::{Array, ArraySubset};

use crate::array::error::ReadError;
use crate::array::geometry::box_copy::{c_strides, BoxCopy};
use crate::array::geometry::selection::{Selection, StridedRange};

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

/// Parts between the selected offsets [`DimParts`] keeps for an irregular
/// grid: finding a part walks at most this many parts from the last kept
/// offset before it, and a dimension of `n` parts keeps `n / 4096` offsets.
const CHECKPOINT_PARTS: u64 = 4096;

/// How a dimension's parts are found from a part's index.
#[derive(Debug)]
enum DimGrid {
    /// A regular grid of chunks of this length along the dimension: a part
    /// and where it starts are arithmetic.
    Regular { chunk_len: u64 },
    /// Any other grid (whose chunks zarrs places): the selected offset
    /// where every [`CHECKPOINT_PARTS`]-th part starts, from which a part is
    /// found by walking chunk to chunk.
    Walked { checkpoints: Vec<u64> },
}

/// The chunks along dimension `d` that hold indices of `sel`, found from a
/// part's index on demand: a dimension of millions of chunks costs no
/// memory in proportion to them.
#[derive(Debug)]
struct DimParts {
    d: usize,
    sel: StridedRange,
    /// Selected indices.
    total: u64,
    /// Parts (chunks holding selected indices).
    len: u64,
    /// The index of the first of the longest parts.
    largest: u64,
    grid: DimGrid,
}

impl DimParts {
    /// The parts of `sel` (at least one index) along dimension `d`: on a
    /// regular grid at once, on another by one walk from chunk to chunk
    /// (never per index).
    fn new<S: ?Sized>(array: &Array<S>, d: usize, sel: StridedRange) -> Result<Self, ReadError> {
        let mut parts = Self {
            d,
            sel,
            total: sel.count(),
            len: 0,
            largest: 0,
            grid: DimGrid::Walked {
                checkpoints: Vec::new(),
            },
        };
        if array.chunk_grid().name_v3().as_deref() != Some("regular") {
            return parts.walk(array);
        }
        let shape = array.chunk_shape(&vec![0; array.dimensionality()]).map_err(invalid)?;
        let chunk_len = shape[d].get();
        let last = sel.start + (parts.total - 1) * sel.step;
        parts.len = match sel.step >= chunk_len {
            // Every selected index in a chunk of its own.
            true => parts.total,
            // Every chunk from the first index's to the last's holds one.
            false => last / chunk_len - sel.start / chunk_len + 1,
        };
        parts.grid = DimGrid::Regular { chunk_len };
        Ok(parts)
    }

    /// These parts (of a [`DimGrid::Walked`] grid, none counted yet)
    /// counted by one walk from chunk to chunk, keeping checkpoints.
    fn walk<S: ?Sized>(mut self, array: &Array<S>) -> Result<Self, ReadError> {
        let (mut checkpoints, mut longest, mut done) = (Vec::new(), 0, 0);
        while done < self.total {
            if self.len.is_multiple_of(CHECKPOINT_PARTS) {
                checkpoints.push(done);
            }
            let part = self.part_from(array, done)?;
            if part.chunk_len > longest {
                (longest, self.largest) = (part.chunk_len, self.len);
            }
            self.len += 1;
            done += part.count;
        }
        self.grid = DimGrid::Walked { checkpoints };
        Ok(self)
    }

    /// The part that starts at selected offset `done`.
    fn part_from<S: ?Sized>(&self, array: &Array<S>, done: u64) -> Result<DimPart, ReadError> {
        let (d, sel) = (self.d, &self.sel);
        let index = sel.start + done * sel.step;
        let (chunk, chunk_start, chunk_len) = match self.grid {
            DimGrid::Regular { chunk_len } => (index / chunk_len, index / chunk_len * chunk_len, chunk_len),
            DimGrid::Walked { .. } => {
                let mut point = vec![0u64; array.dimensionality()];
                point[d] = index;
                let chunk = array
                    .chunk_grid()
                    .chunk_indices(&point)
                    .map_err(invalid)?
                    .ok_or_else(|| ReadError::InvalidSubset {
                        source: format!("index {index} of dimension {d} is in no chunk").into(),
                    })?;
                let subset = array.chunk_subset(&chunk).map_err(invalid)?;
                (chunk[d], subset.start()[d], subset.shape()[d])
            }
        };
        let local_start = index - chunk_start;
        let count = ((chunk_len - local_start - 1) / sel.step + 1).min(self.total - done);
        Ok(DimPart {
            chunk,
            chunk_len,
            local_start,
            count,
            dst_start: done,
        })
    }

    /// The selected offset where part `k` starts.
    fn offset_of<S: ?Sized>(&self, array: &Array<S>, k: u64) -> Result<u64, ReadError> {
        match &self.grid {
            DimGrid::Regular { chunk_len } if self.sel.step >= *chunk_len || k == 0 => Ok(k),
            DimGrid::Regular { chunk_len } => {
                let chunk_start = (self.sel.start / chunk_len + k) * chunk_len;
                Ok((chunk_start - self.sel.start).div_ceil(self.sel.step))
            }
            DimGrid::Walked { checkpoints } => {
                let mut done = checkpoints[(k / CHECKPOINT_PARTS) as usize];
                for _ in 0..k % CHECKPOINT_PARTS {
                    done += self.part_from(array, done)?.count;
                }
                Ok(done)
            }
        }
    }

    /// Part `k`.
    fn part<S: ?Sized>(&self, array: &Array<S>, k: u64) -> Result<DimPart, ReadError> {
        self.part_from(array, self.offset_of(array, k)?)
    }

    /// The `n` parts from part `from` on, the first following the last.
    fn window<S: ?Sized>(&self, array: &Array<S>, from: u64, n: u64) -> Result<Vec<DimPart>, ReadError> {
        let mut done = self.offset_of(array, from)?;
        (0..n)
            .map(|_| {
                let part = self.part_from(array, done)?;
                done = (done + part.count) % self.total;
                Ok(part)
            })
            .collect()
    }
}

/// A subset the grid finds no chunk for.
fn invalid(e: impl std::error::Error + Send + Sync + 'static) -> ReadError {
    ReadError::InvalidSubset { source: Box::new(e) }
}

/// Most chunks planned at once: a read of more chunks plans and reads
/// them in batches of this many (in C order of the chunk grid), so that its
/// plan costs memory (about 600 bytes a chunk: key, indices, boxes) in
/// proportion to a batch, not to the read. A batch of 32,768 chunks of
/// 64 KiB is 2 GiB of output, many waves: the pause between batches (the
/// last wave of one drains before the next is fetched) is rare.
pub(crate) const PLAN_BATCH_CHUNKS: u64 = 1 << 15;

/// The chunks that hold selected elements, found dimension by dimension
/// (never per index), and planned in batches ([`Planner::batches`]): a
/// batch finds the parts it meets along each dimension, so planning holds
/// memory in proportion to a batch, not to the chunks along a dimension.
pub(crate) struct Planner<'a, S: ?Sized> {
    array: &'a Array<S>,
    /// The selection's parts along each dimension.
    parts: Vec<DimParts>,
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
    /// (`None`: C order; see [`crate::array::chain::transpose`]). `out_len` is the
    /// output's size in bytes, checked by the caller; chunks that decode to
    /// more than `max_decoded_size` (when given) are errors.
    pub(crate) fn new(
        array: &'a Array<S>,
        selection: &Selection,
        (elem, order): (usize, Option<&'a [usize]>),
        out_len: usize,
        max_decoded_size: Option<u64>,
    ) -> Result<Self, ReadError> {
        crate::array::geometry::limits::check_shape(array.shape())?;
        selection
            .check_within(array.shape())
            .map_err(|reason| ReadError::InvalidSubset { source: reason.into() })?;
        let parts = match out_len {
            0 => Vec::new(),
            _ => selection
                .dims()
                .iter()
                .enumerate()
                .map(|(d, sel)| DimParts::new(array, d, *sel))
                .collect::<Result<Vec<_>, _>>()?,
        };
        // Each part holds a selected index: the count is at most the
        // output's elements.
        let count = match out_len {
            0 => 0,
            _ => parts.iter().fold(1u64, |n, p| n.saturating_mul(p.len)),
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
        if self.count == 0 {
            return Ok(());
        }
        let largest = self.parts.iter().map(|parts| parts.part(self.array, parts.largest));
        self.chunk(&largest.collect::<Result<Vec<_>, _>>()?).map(drop)
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
        let windows = self.windows(&range)?;
        // Indices below the count, at most the output's elements: usize.
        let range = range.start as usize..range.end as usize;
        let chunks =
            crate::pool::collect_in_order(range.into_par_iter().map(|k| self.chunk(&meeting(&windows, k as u64))))?;
        Ok(Plan {
            shape: self.shape.clone(),
            steps: self.steps.clone(),
            chunks,
        })
    }

    /// The parts that the chunks `range` (not empty) meet along each
    /// dimension: at most as many as the chunks along each.
    fn windows(&self, range: &std::ops::Range<u64>) -> Result<Vec<Window>, ReadError> {
        let mut inner = self.count;
        self.parts
            .iter()
            .map(|parts| {
                // Chunks per part along this dimension: the product of the
                // parts of the dimensions inside it.
                inner /= parts.len;
                let first = range.start / inner;
                let n = ((range.end - 1) / inner - first + 1).min(parts.len);
                Ok(Window {
                    inner,
                    first,
                    len: parts.len,
                    parts: parts.window(self.array, first % parts.len, n)?,
                })
            })
            .collect()
    }
}

/// The parts of one dimension that a batch meets.
struct Window {
    /// Chunks per part: the product of the parts of the inner dimensions.
    inner: u64,
    /// The first chunk's part, counted on over the outer dimensions.
    first: u64,
    /// Parts along the dimension.
    len: u64,
    /// From the first chunk's part on, the first following the last.
    parts: Vec<DimPart>,
}

/// The parts of chunk `k` (C order of the parts), one of the batch that
/// the `windows` are of, along each dimension.
fn meeting(windows: &[Window], k: u64) -> Vec<DimPart> {
    windows
        .iter()
        .map(|w| w.parts[((k / w.inner - w.first) % w.len) as usize])
        .collect()
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
    let decoded =
        crate::array::geometry::limits::chunk_bytes(&chunk_shape, elem).ok_or_else(|| ReadError::InvalidMetadata {
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
        Some(order) => crate::array::chain::transpose::stored_strides(&chunk_shape, order, elem),
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
