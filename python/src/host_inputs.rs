//! Host buffers as the engine reads them: raw regions of buffer-protocol
//! objects, and the check that outputs share memory with no other buffer.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

use crate::errors::invalid_argument;

/// Raw pointers of host buffers, which the engine reads with the GIL released.
pub(crate) struct HostInputs {
    pub(crate) regions: Vec<(usize, usize)>,
}

impl HostInputs {
    /// The regions of `buffers`, which must be C-contiguous; `what` names
    /// them in errors ("input", "output").
    pub(crate) fn new(buffers: &[PyBuffer<u8>], what: &str) -> PyResult<Self> {
        let regions = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if !b.is_c_contiguous() {
                    return Err(invalid_argument(format!("{what} {i} of the batch is not contiguous")));
                }
                Ok((b.buf_ptr() as usize, b.len_bytes()))
            })
            .collect::<PyResult<_>>()?;
        Ok(Self { regions })
    }

    /// The buffers as slices.
    ///
    /// # Safety
    /// The `PyBuffer`s these came from must still be held.
    pub(crate) unsafe fn slices(&self) -> Vec<&[u8]> {
        self.regions
            .iter()
            .map(|&(ptr, len)| {
                if len == 0 {
                    &[][..]
                } else {
                    unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
                }
            })
            .collect()
    }

    /// The buffers as writable slices.
    ///
    /// # Safety
    /// The `PyBuffer`s these came from must be held for `'a`, be writable
    /// and not overlap one another (see [`check_disjoint`]).
    pub(crate) unsafe fn slices_mut<'a>(&self) -> Vec<&'a mut [u8]> {
        self.regions
            .iter()
            .map(|&(ptr, len)| {
                if len == 0 {
                    &mut [][..]
                } else {
                    unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) }
                }
            })
            .collect()
    }

    /// The regions as `(address, length)`.
    pub(crate) fn pairs(&self) -> Vec<(u64, usize)> {
        self.regions.iter().map(|&(p, l)| (p as u64, l)).collect()
    }
}

/// Checks that no output overlaps another output or an input, all given as
/// `(address, length)`: buffers are decoded in parallel, so overlapping
/// outputs would race.
pub(crate) fn check_disjoint(inputs: &[(u64, usize)], outputs: &[(u64, usize)]) -> PyResult<()> {
    // (start, end, is output, index), by start: a region overlaps an earlier
    // one exactly when it starts before the furthest end among them.
    let mut regions: Vec<(u64, u64, bool, usize)> = outputs
        .iter()
        .map(|r| (r, true))
        .enumerate()
        .chain(inputs.iter().map(|r| (r, false)).enumerate())
        .filter(|(_, ((_, len), _))| *len > 0)
        .map(|(i, ((ptr, len), out))| (*ptr, ptr.saturating_add(*len as u64), out, i))
        .collect();
    regions.sort_unstable();
    let name = |(out, i): (bool, usize)| format!("{} buffer {i}", if out { "output" } else { "input" });
    // (end, is output, index) of the region reaching furthest: among all
    // regions seen, and among the outputs.
    type Reach = Option<(u64, bool, usize)>;
    let (mut furthest, mut furthest_output): (Reach, Reach) = (None, None);
    for (start, end, out, i) in regions {
        let against = if out { furthest } else { furthest_output };
        if let Some((_, other_out, other)) = against.filter(|(reach, ..)| start < *reach) {
            return Err(invalid_argument(format!(
                "{} overlaps {}: outputs are written in parallel and must not share memory with another buffer",
                name((out, i)),
                name((other_out, other))
            )));
        }
        if furthest.is_none_or(|(reach, ..)| end > reach) {
            furthest = Some((end, out, i));
        }
        if out && furthest_output.is_none_or(|(reach, ..)| end > reach) {
            furthest_output = Some((end, out, i));
        }
    }
    Ok(())
}

/// Raises `InvalidArgumentError` (a `ValueError`) when an output region
/// overlaps another output or an input, as the decoders would race.
#[pyfunction]
#[pyo3(name = "check_disjoint")]
pub(crate) fn check_disjoint_py(
    inputs: &Bound<'_, crate::device_inputs::DeviceRegions>,
    outputs: &Bound<'_, crate::device_inputs::DeviceRegions>,
) -> PyResult<()> {
    check_disjoint(&inputs.get().pairs(), &outputs.get().pairs())
}
