//! The placement of a decoded batch: [`CudaEngine::decode_scatter`]
//! decodes host buffers with one nvCOMP batch call, and the rows a
//! [`Scatter`] names are copied from every decoded buffer into one device
//! buffer (an array being assembled),
//! together with rows of a fill value where buffers are missing, in one
//! launch of the copy kernel.
//!
//! A [`Scatter`] describes the placement in offsets relative to each buffer,
//! so its caller never handles the addresses of the decoded batch, which
//! lives on the device only until the copies are done.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::copies::Rows;
use super::memory::cuda_err;
use super::{CudaEngine, DeviceRegion};
use crate::error::Result;
use crate::format::filters::ElementFilters;
use crate::format::scale_offset::ScaleOffset;

/// A strided copy between two buffers, in byte offsets relative to each: row
/// `r` (of `rows`) is `width` bytes from `src_offset + r * src_pitch` of the
/// source to `dst_offset + r * dst_pitch` of the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowCopy {
    /// Offset of the first source row.
    pub src_offset: usize,
    /// Offset of the first destination row.
    pub dst_offset: usize,
    /// Bytes per row.
    pub width: usize,
    /// Number of rows.
    pub rows: usize,
    /// Bytes from one source row to the next.
    pub src_pitch: usize,
    /// Bytes from one destination row to the next.
    pub dst_pitch: usize,
}

impl RowCopy {
    /// One past the last byte the rows touch from `offset` at `pitch` (0 for
    /// an empty copy); `None` where that overflows.
    fn end(&self, offset: usize, pitch: usize) -> Option<usize> {
        if self.width == 0 || self.rows == 0 {
            return Some(0);
        }
        pitch
            .checked_mul(self.rows - 1)?
            .checked_add(offset)?
            .checked_add(self.width)
    }

    /// Panics unless the rows lie within a source of `src_len` bytes and a
    /// destination of `dst_len` bytes: a placement outside them is a bug of
    /// the caller, and would otherwise write device memory it does not own.
    fn assert_within(&self, src_len: usize, dst_len: usize, what: &dyn std::fmt::Display) {
        let src_end = self.end(self.src_offset, self.src_pitch);
        let dst_end = self.end(self.dst_offset, self.dst_pitch);
        assert!(
            src_end.is_some_and(|end| end <= src_len) && dst_end.is_some_and(|end| end <= dst_len),
            "scatter rows {self:?} of {what} lie outside its {src_len} source bytes or the {dst_len} destination bytes"
        );
    }

    /// The copy between the buffers at device addresses `src` and `dst`.
    pub(crate) fn at(&self, src: u64, dst: u64) -> Rows {
        Rows {
            src: src + self.src_offset as u64,
            dst: dst + self.dst_offset as u64,
            width: self.width,
            rows: self.rows,
            src_pitch: self.src_pitch,
            dst_pitch: self.dst_pitch,
        }
    }
}

/// Where [`CudaEngine::decode_scatter`] places a decoded batch in one device
/// buffer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scatter {
    /// The bytes each buffer must decode to, one entry per input.
    pub decoded_lens: Vec<usize>,
    /// `(buffer, rows)`: rows of decoded buffer `buffer` copied into the
    /// destination.
    pub copies: Vec<(usize, RowCopy)>,
    /// One element of the fill value.
    pub fill_value: Vec<u8>,
    /// Rows of the destination set to the fill value. Their source is the
    /// fill value repeated over as many bytes as they read: a source offset
    /// that is a multiple of its length starts with its first byte (a pitch
    /// of 0 reads the same row every time).
    pub fills: Vec<RowCopy>,
    /// `(buffer, stored)`: the Adler-32 (zlib's trailer) that decoded buffer
    /// `buffer` must have; checked on the device before anything is placed.
    pub adler32: Vec<(usize, u32)>,
    /// Filters undone on every decoded buffer, whole and in place, after the
    /// checksums and before anything is placed.
    pub filters: ElementFilters,
    /// numcodecs `fixedscaleoffset`, after `filters`: each decoded buffer's
    /// integers widened into floats of a buffer of
    /// [`ScaleOffset::decoded_len`] bytes, which the copies then read.
    pub scale_offset: Option<ScaleOffset>,
}

impl Scatter {
    /// The fill value repeated over the bytes the fills read; `None` when
    /// they read nothing.
    fn fill_source(&self) -> Option<Vec<u8>> {
        let len = self
            .fills
            .iter()
            .map(|rows| {
                rows.end(rows.src_offset, rows.src_pitch)
                    .expect("fill rows within usize")
            })
            .max()
            .filter(|len| *len > 0)?;
        assert!(!self.fill_value.is_empty(), "scatter fills without a fill value");
        let mut source = self.fill_value.repeat(len.div_ceil(self.fill_value.len()));
        source.truncate(len);
        Some(source)
    }

    /// The bytes the copies read of each buffer: its decoded bytes, or
    /// their widened floats.
    pub(super) fn source_lens(&self) -> Vec<usize> {
        match &self.scale_offset {
            Some(widen) => self.decoded_lens.iter().map(|len| widen.decoded_len(*len)).collect(),
            None => self.decoded_lens.clone(),
        }
    }

    /// Panics unless every row lies within its source and `dst_len`, every
    /// copy names a buffer of the batch, and the filters are ones the kernels
    /// undo.
    pub(super) fn assert_within(&self, dst_len: usize) {
        self.filters.assert_valid();
        if let Some(widen) = &self.scale_offset {
            widen.assert_valid();
        }
        let fill_len = self.fill_source().as_ref().map_or(0, Vec::len);
        let source_lens = self.source_lens();
        for (buffer, rows) in &self.copies {
            let len = *source_lens.get(*buffer).unwrap_or_else(|| {
                panic!(
                    "scatter copy from buffer {buffer} of a batch of {}",
                    self.decoded_lens.len()
                )
            });
            rows.assert_within(len, dst_len, &format_args!("buffer {buffer}"));
        }
        for rows in &self.fills {
            rows.assert_within(fill_len, dst_len, &"the fill value");
        }
    }
}

/// Enqueues the rows of `scatter` into `dst` in one launch of the copy
/// kernel: its copies from decoded buffer `i` at device address
/// `source(i)`, and its fills from the fill value, uploaded into
/// `fill_source`, which the caller keeps until the stream has run them.
///
/// # Safety
/// Each decoded buffer must be live device memory of this engine of its
/// `scatter.decoded_lens` bytes until the stream has run the copies;
/// `dst` as for [`CudaEngine::decode_scatter`]; the rows must lie within them
/// ([`Scatter::assert_within`]).
pub(super) unsafe fn enqueue_scatter(
    engine: &CudaEngine,
    scatter: &Scatter,
    source: impl Fn(usize) -> u64,
    dst: DeviceRegion,
    fill_source: &mut Option<CudaSlice<u8>>,
) -> Result<()> {
    let mut rows: Vec<Rows> = scatter
        .copies
        .iter()
        .map(|(buffer, copy)| copy.at(source(*buffer), dst.ptr))
        .collect();
    if let Some(pattern) = scatter.fill_source() {
        let stream = engine.stream();
        let source = fill_source.insert(stream.clone_htod(&pattern).map_err(cuda_err("cuMemcpyHtoDAsync"))?);
        let (ptr, guard) = source.device_ptr(stream);
        drop(guard);
        rows.extend(scatter.fills.iter().map(|copy| copy.at(ptr, dst.ptr)));
    }
    // SAFETY: the caller vouches for the sources, the fill source is
    // kept by the caller, and the rows lie within them and `dst`.
    unsafe { engine.enqueue_rows(&rows) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(src_offset: usize, dst_offset: usize, width: usize, rows: usize, pitch: usize) -> RowCopy {
        RowCopy {
            src_offset,
            dst_offset,
            width,
            rows,
            src_pitch: pitch,
            dst_pitch: pitch,
        }
    }

    #[test]
    fn rows_end_after_their_last_byte() {
        assert_eq!(rows(4, 0, 3, 2, 10).end(4, 10), Some(17));
        assert_eq!(rows(4, 0, 0, 2, 10).end(4, 10), Some(0));
        assert_eq!(rows(0, 0, 1, usize::MAX, 2).end(0, 2), None);
    }

    #[test]
    fn fill_sources_repeat_the_value_over_what_the_fills_read() {
        let scatter = Scatter {
            fill_value: vec![1, 2, 3],
            fills: vec![rows(0, 0, 6, 4, 0), rows(3, 40, 3, 2, 3)],
            ..Scatter::default()
        };
        assert_eq!(scatter.fill_source(), Some(vec![1, 2, 3, 1, 2, 3, 1, 2, 3]));
        scatter.assert_within(64);
        assert_eq!(Scatter::default().fill_source(), None);
    }

    #[test]
    #[should_panic(expected = "lie outside")]
    fn rows_beyond_a_decoded_buffer_are_refused() {
        let scatter = Scatter {
            decoded_lens: vec![16, 8],
            copies: vec![(0, rows(0, 0, 16, 1, 0)), (1, rows(4, 16, 8, 1, 0))],
            ..Scatter::default()
        };
        scatter.assert_within(64);
    }

    #[test]
    #[should_panic(expected = "lie outside")]
    fn rows_beyond_the_destination_are_refused() {
        let scatter = Scatter {
            decoded_lens: vec![16],
            copies: vec![(0, rows(0, 8, 4, 4, 4))],
            ..Scatter::default()
        };
        scatter.assert_within(23);
    }

    #[test]
    #[should_panic(expected = "batch of 1")]
    fn copies_from_buffers_beyond_the_batch_are_refused() {
        let scatter = Scatter {
            decoded_lens: vec![16],
            copies: vec![(1, rows(0, 0, 4, 1, 0))],
            ..Scatter::default()
        };
        scatter.assert_within(64);
    }
}
