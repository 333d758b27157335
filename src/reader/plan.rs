//! Which chunks a subset touches, and where each chunk's part of the subset
//! goes in the output: one strided box copy per chunk.

use zarrs::array::{Array, ArraySubset};

use super::ReadError;

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
    pub fn new(
        src_shape: &[u64],
        src_start: &[u64],
        dst_shape: &[u64],
        dst_start: &[u64],
        extent: &[u64],
        elem: usize,
    ) -> Self {
        let n = extent.len();
        let strides = |shape: &[u64]| {
            let mut s = vec![elem; n];
            for d in (0..n.saturating_sub(1)).rev() {
                s[d] = s[d + 1] * shape[d + 1] as usize;
            }
            s
        };
        let (src_strides, dst_strides) = (strides(src_shape), strides(dst_shape));
        let offset = |start: &[u64], strides: &[usize]| start.iter().zip(strides).map(|(i, s)| *i as usize * s).sum();
        let mut copy = Self {
            src_offset: offset(src_start, &src_strides),
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
            let (count, ss, ds) = (extent[d - 1] as usize, src_strides[d - 1], dst_strides[d - 1]);
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
    pub fn bytes(&self) -> usize {
        self.width * self.outer.iter().map(|d| d.count).product::<usize>()
    }

    /// Calls `f(src_offset, dst_offset)` for every contiguous row, in order.
    pub fn for_each_row(&self, mut f: impl FnMut(usize, usize)) {
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
}

impl ChunkPlan {
    /// Whether the decoded chunk is, whole, one contiguous run of the output.
    pub fn is_whole_run(&self) -> bool {
        self.copy.outer.is_empty() && self.copy.src_offset == 0 && self.copy.width == self.decoded_len
    }
}

/// The chunks of a read and the output they fill.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Shape of the output (the subset's).
    pub shape: Vec<u64>,
    /// Output bytes.
    pub out_len: usize,
    /// Every chunk that intersects the subset.
    pub chunks: Vec<ChunkPlan>,
}

/// Plans the read of `subset` from `array`, whose elements have `elem` bytes.
pub(crate) fn plan<S: ?Sized>(
    array: &Array<S>,
    subset: &ArraySubset,
    elem: usize,
    max_decoded_size: u64,
) -> Result<Plan, ReadError> {
    let invalid = |reason: String| ReadError::InvalidSubset { reason };
    if subset.dimensionality() != array.dimensionality() || !subset.inbounds_shape(array.shape()) {
        return Err(invalid(format!(
            "subset {:?} is not within the array of shape {:?}",
            subset.to_ranges(),
            array.shape()
        )));
    }
    let out_len = usize::try_from(subset.num_elements())
        .ok()
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(|| invalid("the subset's size overflows".into()))?;
    let mut chunks = Vec::new();
    if out_len > 0 {
        let grid = array
            .chunks_in_array_subset(subset)
            .map_err(|e| invalid(e.to_string()))?
            .ok_or_else(|| invalid("the chunks of the subset cannot be determined".into()))?;
        for indices in &grid.indices() {
            let indices: Vec<u64> = indices.to_vec();
            let chunk = array.chunk_subset(&indices).map_err(|e| invalid(e.to_string()))?;
            let overlap = chunk.overlap(subset).map_err(|e| invalid(e.to_string()))?;
            if overlap.num_elements() == 0 {
                continue;
            }
            let decoded = chunk.num_elements().saturating_mul(elem as u64);
            let key = array.chunk_key(&indices).to_string();
            if decoded > max_decoded_size {
                return Err(ReadError::ChunkTooLarge {
                    key,
                    size: decoded,
                    limit: max_decoded_size,
                });
            }
            let src_start: Vec<u64> = overlap.start().iter().zip(chunk.start()).map(|(o, c)| o - c).collect();
            let dst_start: Vec<u64> = overlap.start().iter().zip(subset.start()).map(|(o, s)| o - s).collect();
            let copy = BoxCopy::new(
                chunk.shape(),
                &src_start,
                subset.shape(),
                &dst_start,
                overlap.shape(),
                elem,
            );
            chunks.push(ChunkPlan {
                indices,
                key,
                decoded_len: decoded as usize,
                copy,
            });
        }
    }
    Ok(Plan {
        shape: subset.shape().to_vec(),
        out_len,
        chunks,
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
}
