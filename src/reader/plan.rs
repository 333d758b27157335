//! Which chunks a subset touches, and where each chunk's part of the subset
//! goes in the output: one strided box copy per chunk.

use rayon::prelude::*;
use zarrs::array::{Array, ArraySubset};

use super::selection::{Selection, StridedRange};
use super::{BoxedSource, ReadError};
use crate::cuda::RowCopy;

/// One dimension of a box copy, outside the contiguous row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dim {
    /// Number of rows (or sub-boxes) along this dimension.
    pub count: usize,
    /// Bytes between consecutive entries in the source.
    pub src_stride: usize,
    /// Bytes between consecutive entries in the destination.
    pub dst_stride: usize,
}

/// A strided copy of an n-dimensional box: contiguous rows of `width` bytes,
/// repeated over `outer` dimensions (outermost first). Dimensions that are
/// contiguous in both source and destination are merged, so a box that is one
/// run of bytes on both sides has no outer dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoxCopy {
    /// Byte offset of the box in the source.
    pub src_offset: usize,
    /// Byte offset of the box in the destination.
    pub dst_offset: usize,
    /// Bytes of one contiguous row.
    pub width: usize,
    /// Outer dimensions, outermost first.
    pub outer: Vec<Dim>,
}

impl BoxCopy {
    /// The copy of the box `extent` at `src_start` of a C-order source of
    /// shape `src_shape` to `dst_start` of a C-order destination of shape
    /// `dst_shape`, with elements of `elem` bytes.
    #[cfg(test)]
    pub(super) fn new(
        src_shape: &[u64],
        src_start: &[u64],
        dst_shape: &[u64],
        dst_start: &[u64],
        extent: &[u64],
        elem: usize,
    ) -> Self {
        let steps = vec![1; extent.len()];
        Self::strided(src_shape, src_start, &steps, dst_shape, dst_start, extent, elem)
    }

    /// The copy of `extent` elements per dimension, taken `steps` apart from
    /// `src_start` of a C-order source of shape `src_shape`, to the box at
    /// `dst_start` of a C-order destination of shape `dst_shape`, with
    /// elements of `elem` bytes.
    pub(crate) fn strided(
        src_shape: &[u64],
        src_start: &[u64],
        steps: &[u64],
        dst_shape: &[u64],
        dst_start: &[u64],
        extent: &[u64],
        elem: usize,
    ) -> Self {
        let src_strides = c_strides(src_shape, elem);
        Self::strided_from(&src_strides, src_start, steps, dst_shape, dst_start, extent, elem)
    }

    /// [`Self::strided`] from a source whose dimensions are `src_strides`
    /// bytes apart (one stored in another order than C's).
    pub(crate) fn strided_from(
        src_strides: &[usize],
        src_start: &[u64],
        steps: &[u64],
        dst_shape: &[u64],
        dst_start: &[u64],
        extent: &[u64],
        elem: usize,
    ) -> Self {
        let n = extent.len();
        let dst_strides = c_strides(dst_shape, elem);
        let offset = |start: &[u64], strides: &[usize]| start.iter().zip(strides).map(|(i, s)| *i as usize * s).sum();
        let mut copy = Self {
            src_offset: offset(src_start, src_strides),
            dst_offset: offset(dst_start, &dst_strides),
            width: elem,
            outer: Vec::new(),
        };
        if extent.contains(&0) {
            copy.width = 0;
            return copy;
        }
        // Inner dimensions join the row while the row is contiguous in both.
        let mut d = n;
        while d > 0 {
            let (count, ds) = (extent[d - 1] as usize, dst_strides[d - 1]);
            let ss = src_strides[d - 1] * steps[d - 1] as usize;
            if copy.outer.is_empty() && ss == copy.width && ds == copy.width {
                copy.width *= count;
            } else if let Some(first) = copy
                .outer
                .first_mut()
                .filter(|f| ss == f.src_stride * f.count && ds == f.dst_stride * f.count)
            {
                first.count *= count;
            } else if count > 1 {
                copy.outer.insert(
                    0,
                    Dim {
                        count,
                        src_stride: ss,
                        dst_stride: ds,
                    },
                );
            }
            d -= 1;
        }
        copy
    }

    /// Total bytes copied.
    pub(crate) fn bytes(&self) -> usize {
        self.width * self.outer.iter().map(|d| d.count).product::<usize>()
    }

    /// Calls `f(src_offset, dst_offset)` for every contiguous row, in order.
    pub(crate) fn for_each_row(&self, mut f: impl FnMut(usize, usize)) {
        if self.width == 0 {
            return;
        }
        let mut index = vec![0usize; self.outer.len()];
        loop {
            let (mut s, mut t) = (self.src_offset, self.dst_offset);
            for (i, dim) in index.iter().zip(&self.outer) {
                s += i * dim.src_stride;
                t += i * dim.dst_stride;
            }
            f(s, t);
            // Odometer increment, innermost outer dimension first.
            let mut k = self.outer.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                index[k] += 1;
                if index[k] < self.outer[k].count {
                    break;
                }
                index[k] = 0;
            }
        }
    }

    /// The copy as strided rows in offsets relative to source and destination
    /// (for the device's copy kernel, [`crate::cuda::Scatter`]): one per index
    /// of the dimensions outside the innermost outer one.
    pub(crate) fn row_copies(&self, mut f: impl FnMut(RowCopy)) {
        if self.width == 0 {
            return;
        }
        let Some((inner, planes)) = self.outer.split_last() else {
            return f(RowCopy {
                src_offset: self.src_offset,
                dst_offset: self.dst_offset,
                width: self.width,
                rows: 1,
                src_pitch: 0,
                dst_pitch: 0,
            });
        };
        let planes = Self {
            outer: planes.to_vec(),
            ..self.clone()
        };
        planes.for_each_row(|src_offset, dst_offset| {
            f(RowCopy {
                src_offset,
                dst_offset,
                width: self.width,
                rows: inner.count,
                src_pitch: inner.src_stride,
                dst_pitch: inner.dst_stride,
            });
        });
    }
}

/// The byte strides of a C-order array of `shape` with elements of `elem` bytes.
fn c_strides(shape: &[u64], elem: usize) -> Vec<usize> {
    let n = shape.len();
    let mut s = vec![elem; n];
    for d in (0..n.saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as usize;
    }
    s
}

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

/// The chunks of a read and the output they fill.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Shape of the output (the selection's).
    pub shape: Vec<u64>,
    /// The selection's step per dimension.
    pub steps: Vec<u64>,
    /// Output bytes.
    pub out_len: usize,
    /// Every chunk that holds a selected element.
    pub chunks: Vec<ChunkPlan>,
}

impl Plan {
    /// The copy of `chunk`'s selected elements from a source that holds
    /// exactly its [`ChunkPlan::local_box`] (C order) into the output.
    pub(super) fn copy_from_box(&self, chunk: &ChunkPlan, elem: usize) -> BoxCopy {
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

/// Plans the read of `selection` from `array`, whose elements have `elem`
/// bytes: the chunks that hold selected elements, found dimension by
/// dimension, so planning costs memory in proportion to those chunks, never
/// to the array. `out_len` is the output's size in bytes, checked by the
/// caller; chunks that decode to more than `max_decoded_size` (when given)
/// are errors.
pub(crate) fn plan<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    selection: &Selection,
    elem: usize,
    out_len: usize,
    max_decoded_size: Option<u64>,
) -> Result<Plan, ReadError> {
    plan_stored(array, selection, (elem, None), out_len, max_decoded_size)
}

/// [`plan`] for chunks whose decoded bytes hold their dimensions in `order`
/// (`None`: C order; see [`super::transpose`]): the copies read them through
/// the strides of that order.
pub(crate) fn plan_stored<S: ?Sized + Send + Sync>(
    array: &Array<S>,
    selection: &Selection,
    (elem, order): (usize, Option<&[usize]>),
    out_len: usize,
    max_decoded_size: Option<u64>,
) -> Result<Plan, ReadError> {
    selection
        .check_within(array.shape())
        .map_err(|reason| ReadError::InvalidSubset { source: reason.into() })?;
    let shape = selection.shape();
    let steps: Vec<u64> = selection.dims().iter().map(|d| d.step).collect();
    let mut chunks = Vec::new();
    if out_len > 0 {
        let parts = selection
            .dims()
            .iter()
            .enumerate()
            .map(|(d, sel)| dim_parts(array, d, sel))
            .collect::<Result<Vec<_>, _>>()?;
        let mut meetings: Vec<Vec<DimPart>> = Vec::new();
        let mut at = vec![0usize; parts.len()];
        loop {
            meetings.push(at.iter().zip(&parts).map(|(i, p)| p[*i]).collect());
            // Odometer over the per-dimension parts, innermost fastest.
            let Some(d) = (0..at.len()).rev().find(|&d| at[d] + 1 < parts[d].len()) else {
                break;
            };
            at[d] += 1;
            at[d + 1..].fill(0);
        }
        // In parallel: a chunk's plan costs about a microsecond (its key,
        // boxes and copy), which for the 16,384 inner chunks of a GiB in
        // 64 KiB chunks took 14-23 ms of a 90 ms read on the H200's host.
        chunks = crate::fork::in_pool(|| {
            meetings
                .par_iter()
                .map(|part| chunk_plan(array, part, (&steps, &shape), (elem, order), max_decoded_size))
                .collect::<Result<Vec<_>, _>>()
        })?;
    }
    Ok(Plan {
        shape,
        steps,
        out_len,
        chunks,
    })
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
    let decoded = chunk_shape.iter().product::<u64>().saturating_mul(elem as u64);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(copy: &BoxCopy) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        copy.for_each_row(|s, d| v.push((s, d)));
        v
    }

    #[test]
    fn contiguous_boxes_merge_into_one_row() {
        // Whole 4x5 chunk into rows 4..8 of an 8x5 output.
        let c = BoxCopy::new(&[4, 5], &[0, 0], &[8, 5], &[4, 0], &[4, 5], 2);
        assert_eq!((c.src_offset, c.dst_offset, c.width, c.outer.len()), (0, 40, 40, 0));
        assert_eq!(c.bytes(), 40);
    }

    #[test]
    fn strided_boxes_copy_row_by_row() {
        // Box 2x3 at (1,1) of a 4x5 chunk to (0,2) of a 3x6 output, 1-byte elements.
        let c = BoxCopy::new(&[4, 5], &[1, 1], &[3, 6], &[0, 2], &[2, 3], 1);
        assert_eq!(c.width, 3);
        assert_eq!(
            c.outer,
            vec![Dim {
                count: 2,
                src_stride: 5,
                dst_stride: 6
            }]
        );
        assert_eq!(rows(&c), vec![(6, 2), (11, 8)]);
        // 3-D with a merged middle: full inner two dims in the source only.
        let c = BoxCopy::new(&[2, 3, 4], &[0, 0, 0], &[2, 3, 8], &[0, 0, 4], &[2, 3, 4], 1);
        assert_eq!(c.width, 4);
        assert_eq!(
            c.outer,
            vec![Dim {
                count: 6,
                src_stride: 4,
                dst_stride: 8
            }]
        );
        assert_eq!(rows(&c).len(), 6);
        assert_eq!(BoxCopy::new(&[2], &[0], &[2], &[0], &[0], 4).bytes(), 0);
    }

    #[test]
    fn steps_become_source_strides() {
        // Every third element of rows 1, 3 of a 5x9 chunk (1-byte elements),
        // from column 2, into rows 0..2 of a 2x3 output.
        let c = BoxCopy::strided(&[5, 9], &[1, 2], &[2, 3], &[2, 3], &[0, 0], &[2, 3], 1);
        assert_eq!(rows(&c), vec![(11, 0), (14, 1), (17, 2), (29, 3), (32, 4), (35, 5)]);
        assert_eq!(c.bytes(), 6);
        // A step along the outer dimension only keeps whole rows contiguous.
        let c = BoxCopy::strided(&[6, 4], &[0, 0], &[3, 1], &[2, 4], &[0, 0], &[2, 4], 2);
        assert_eq!((c.width, rows(&c)), (8, vec![(0, 0), (24, 8)]));
    }

    /// `(source offset, destination offset)` of every row of `copies`.
    fn expand(copies: &[RowCopy]) -> Vec<(usize, usize)> {
        let mut rows = Vec::new();
        for c in copies {
            rows.extend((0..c.rows).map(|r| (c.src_offset + r * c.src_pitch, c.dst_offset + r * c.dst_pitch)));
        }
        rows
    }

    #[test]
    fn device_rows_copy_what_host_rows_copy() {
        let boxes = [
            // A whole chunk, one run of the output.
            BoxCopy::new(&[4, 5], &[0, 0], &[8, 5], &[4, 0], &[4, 5], 2),
            // A 2-D box: rows at pitches.
            BoxCopy::new(&[4, 5], &[1, 1], &[3, 6], &[0, 2], &[2, 3], 1),
            // A 3-D box: planes of rows.
            BoxCopy::new(&[4, 5, 6], &[1, 1, 1], &[8, 8, 8], &[0, 2, 3], &[2, 3, 4], 2),
            // Steps along both dimensions.
            BoxCopy::strided(&[5, 9], &[1, 2], &[2, 3], &[2, 3], &[0, 0], &[2, 3], 1),
        ];
        for copy in boxes {
            let mut host = Vec::new();
            copy.for_each_row(|s, d| host.push((s, d)));
            let mut device = Vec::new();
            copy.row_copies(|rows| device.push(rows));
            assert!(device.iter().all(|rows| rows.width == copy.width), "{copy:?}");
            assert_eq!(expand(&device), host, "{copy:?}");
        }
        let mut none = Vec::new();
        BoxCopy::new(&[2], &[0], &[2], &[0], &[0], 4).row_copies(|rows| none.push(rows));
        assert!(none.is_empty());
    }
}
