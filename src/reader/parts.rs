//! What a read reads: one selection into an output of its shape, or a list
//! of boxes back to back in one output (each box's elements in C order,
//! the next box's after them), so that the chunks of every box are fetched
//! and decoded together, in the same waves. Each part is planned by its own
//! [`Planner`]; their chunks are planned together in batches of about
//! [`PLAN_BATCH_CHUNKS`].

use zarrs::array::{Array, ArraySubset};

use crate::array::error::ReadError;
use crate::array::geometry::box_copy::BoxCopy;
use crate::array::geometry::plan::{ChunkPlan, Plan, Planner, PLAN_BATCH_CHUNKS};
use crate::array::geometry::selection::Selection;

/// The selection of a read.
pub(crate) enum Request {
    /// One selection, its output of the selection's shape.
    Selection(Selection),
    /// Boxes of the array, back to back in a one-dimensional output.
    Boxes(Vec<ArraySubset>),
}

impl Request {
    /// Checks every part against the array's `shape`.
    pub(crate) fn check_within(&self, shape: &[u64]) -> Result<(), ReadError> {
        let invalid = |reason: String| ReadError::InvalidSubset { source: reason.into() };
        match self {
            Self::Selection(selection) => selection.check_within(shape).map_err(invalid),
            Self::Boxes(boxes) => boxes
                .iter()
                .try_for_each(|b| Selection::from(b).check_within(shape).map_err(invalid)),
        }
    }

    /// The shape of the output: the selection's, or the elements of every box.
    pub(crate) fn shape(&self) -> Vec<u64> {
        match self {
            Self::Selection(selection) => selection.shape(),
            Self::Boxes(boxes) => vec![boxes.iter().map(ArraySubset::num_elements).sum()],
        }
    }

    /// The selections of the parts, with the number of elements before each
    /// in the output.
    fn parts(&self) -> Vec<(Selection, u64)> {
        match self {
            Self::Selection(selection) => vec![(selection.clone(), 0)],
            Self::Boxes(boxes) => boxes
                .iter()
                .scan(0, |before, b| {
                    let at = *before;
                    *before += b.num_elements();
                    Some((Selection::from(b), at))
                })
                .collect(),
        }
    }
}

/// The planners of a request's parts, each with the byte offset of its part
/// in the output.
pub(crate) struct Parts<'a, S: ?Sized> {
    planners: Vec<(Planner<'a, S>, usize)>,
    elem: usize,
    /// The output's shape and the steps of its selection (one dimension of
    /// step 1 for boxes).
    shape: Vec<u64>,
    steps: Vec<u64>,
}

impl<'a, S: ?Sized + Send + Sync> Parts<'a, S> {
    /// Plans `request` of `array`, whose output has `out_len` bytes (checked
    /// by the caller), as [`Planner::new`] plans a selection; a box's part
    /// of the output, within it, has its own planner's bytes.
    pub(crate) fn new(
        array: &'a Array<S>,
        request: &Request,
        stored: (usize, Option<&'a [usize]>),
        out_len: usize,
        max_decoded_size: Option<u64>,
    ) -> Result<Self, ReadError> {
        let elem = stored.0;
        let planners = request
            .parts()
            .into_iter()
            .map(|(selection, before)| {
                // Within the checked output: the products fit a usize.
                let len = match request {
                    Request::Selection(_) => out_len,
                    Request::Boxes(_) => selection.shape().iter().product::<u64>() as usize * elem,
                };
                let planner = Planner::new(array, &selection, stored, len, max_decoded_size)?;
                Ok((planner, before as usize * elem))
            })
            .collect::<Result<Vec<_>, ReadError>>()?;
        let steps = match request {
            Request::Selection(selection) => selection.dims().iter().map(|d| d.step).collect(),
            Request::Boxes(_) => vec![1],
        };
        Ok(Self {
            planners,
            elem,
            shape: request.shape(),
            steps,
        })
    }

    /// Bytes of the output.
    pub(crate) fn out_len(&self) -> usize {
        self.planners.iter().map(|(planner, _)| planner.out_len()).sum()
    }

    /// Plans of the chunks of every part, in order, their copies into the
    /// output at their part's place; about [`PLAN_BATCH_CHUNKS`] chunks each.
    pub(crate) fn batches(&self) -> impl Iterator<Item = Result<Plan, ReadError>> + '_ {
        let chunks = self.planners.iter().flat_map(|(planner, offset)| {
            planner.batches().map(move |plan| {
                plan.map(|plan| {
                    let mut chunks = plan.chunks;
                    chunks.iter_mut().for_each(|c| c.copy.dst_offset += offset);
                    chunks
                })
            })
        });
        merged(chunks).map(|chunks| {
            chunks.map(|chunks| Plan {
                shape: self.shape.clone(),
                steps: self.steps.clone(),
                chunks,
            })
        })
    }

    /// The chunks of every part, in batches as [`Parts::batches`], each with
    /// the copy of its selected elements from a source that holds exactly
    /// its [`ChunkPlan::local_box`] (C order) into the output.
    pub(crate) fn box_copies(&self) -> impl Iterator<Item = Result<Vec<(ChunkPlan, BoxCopy)>, ReadError>> + '_ {
        let elem = self.elem;
        let copies = self.planners.iter().flat_map(move |(planner, offset)| {
            planner.batches().map(move |plan| {
                plan.map(|plan| {
                    let copy = |chunk: &ChunkPlan| {
                        let mut copy = plan.copy_from_box(chunk, elem);
                        copy.dst_offset += offset;
                        copy
                    };
                    plan.chunks.iter().map(|chunk| (chunk.clone(), copy(chunk))).collect()
                })
            })
        });
        merged(copies)
    }
}

/// The items of consecutive batches gathered into batches of at least
/// [`PLAN_BATCH_CHUNKS`] items (the last may have fewer): a read of many
/// small boxes decodes its chunks in waves of many boxes.
fn merged<T>(
    mut batches: impl Iterator<Item = Result<Vec<T>, ReadError>>,
) -> impl Iterator<Item = Result<Vec<T>, ReadError>> {
    std::iter::from_fn(move || {
        let mut merged: Option<Vec<T>> = None;
        loop {
            match batches.next() {
                None => return merged.map(Ok),
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(batch)) => {
                    let items = merged.get_or_insert_with(Vec::new);
                    items.extend(batch);
                    if items.len() as u64 >= PLAN_BATCH_CHUNKS {
                        return merged.map(Ok);
                    }
                }
            }
        }
    })
}
