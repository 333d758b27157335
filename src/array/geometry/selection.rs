//! What a read selects: per dimension, indices from a start, a step apart
//! (NumPy's basic slicing with positive steps).

use std::ops::Range;

use zarrs::array::ArraySubset;

/// The indices `start, start + step, ...` below `stop` of one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StridedRange {
    /// First index.
    pub start: u64,
    /// Indices stop before this one.
    pub stop: u64,
    /// Distance between consecutive indices; at least 1.
    pub step: u64,
}

impl StridedRange {
    /// `start..stop` with a step of 1.
    pub fn contiguous(range: Range<u64>) -> Self {
        Self {
            start: range.start,
            stop: range.end,
            step: 1,
        }
    }

    /// Number of selected indices.
    pub fn count(&self) -> u64 {
        if self.stop <= self.start || self.step == 0 {
            0
        } else {
            (self.stop - self.start - 1) / self.step + 1
        }
    }

    /// The last selected index, `None` when nothing is selected.
    pub fn last(&self) -> Option<u64> {
        self.count().checked_sub(1).map(|k| self.start + k * self.step)
    }
}

/// A selection of an array: one [`StridedRange`] per dimension. The result of
/// reading it has [`Selection::shape`], in C order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    dims: Vec<StridedRange>,
}

impl Selection {
    /// The selection of `dims`, outermost first.
    pub fn new(dims: Vec<StridedRange>) -> Self {
        Self { dims }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[StridedRange] {
        &self.dims
    }

    /// Number of dimensions.
    pub fn dimensionality(&self) -> usize {
        self.dims.len()
    }

    /// The shape of the result.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().map(StridedRange::count).collect()
    }

    /// Checks that the selection fits an array of `shape`: as many
    /// dimensions, steps of at least 1, selected indices within bounds.
    pub fn check_within(&self, shape: &[u64]) -> Result<(), String> {
        if self.dims.len() != shape.len() {
            return Err(format!(
                "the selection has {} dimensions, the array of shape {shape:?} has {}",
                self.dims.len(),
                shape.len()
            ));
        }
        for (d, (sel, n)) in self.dims.iter().zip(shape).enumerate() {
            if sel.step == 0 {
                return Err(format!("the step of dimension {d} is 0"));
            }
            if sel.last().is_some_and(|last| last >= *n) {
                return Err(format!(
                    "{}..{} (step {}) of dimension {d} is not within its size {n}",
                    sel.start, sel.stop, sel.step
                ));
            }
        }
        Ok(())
    }
}

impl From<&ArraySubset> for Selection {
    fn from(subset: &ArraySubset) -> Self {
        Self::new(subset.to_ranges().into_iter().map(StridedRange::contiguous).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_python_slices() {
        let r = |start, stop, step| StridedRange { start, stop, step };
        assert_eq!(r(0, 10, 3).count(), 4); // 0 3 6 9
        assert_eq!(r(0, 10, 3).last(), Some(9));
        assert_eq!(r(1, 10, 3).count(), 3); // 1 4 7
        assert_eq!(r(5, 5, 1).count(), 0);
        assert_eq!(r(5, 5, 1).last(), None);
        assert_eq!(r(0, 1_000_000, 500_000).count(), 2);
        let sel = Selection::new(vec![r(0, 1_000_000, 500_000), r(3, 4, 1)]);
        assert_eq!(sel.shape(), [2, 1]);
        assert!(sel.check_within(&[1_000_000, 4]).is_ok());
        assert!(sel.check_within(&[500_000, 4]).is_err());
        assert!(sel.check_within(&[1_000_000]).is_err());
        assert!(Selection::new(vec![r(0, 4, 0)]).check_within(&[4]).is_err());
    }
}
