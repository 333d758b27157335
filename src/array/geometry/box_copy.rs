//! [`BoxCopy`]: the strided copy of an n-dimensional box between two
//! C-order (or otherwise strided) buffers, as rows of contiguous bytes; the
//! copy of one chunk's part of a selection into the output.

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
    pub(crate) fn new(
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
pub(crate) fn c_strides(shape: &[u64], elem: usize) -> Vec<usize> {
    let n = shape.len();
    let mut s = vec![elem; n];
    for d in (0..n.saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as usize;
    }
    s
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
