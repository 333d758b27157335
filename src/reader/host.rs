//! Host output: [`HostOutput`], the memory a read to the host fills in
//! disjoint parts from many threads (its own, or the caller's), and
//! [`HostWaves`], the CPU's [`WaveDecoder`] into it.

use rayon::prelude::*;
use zarrs::array::DataType;

use super::wave::{WaveCodec, WaveDecoder};
use super::ArrayData;
use crate::array::chain::Filters;
use crate::array::error::ReadError;
use crate::array::geometry::box_copy::BoxCopy;
use crate::array::wave_item::{fill_is_zero, item_error, WaveItem};
use crate::codec::{Backend, BatchCodec};
use crate::format::checksum::ContentCheck;

/// Host memory that chunk tasks write in disjoint parts, in parallel: the
/// read's own, or memory lent to it.
pub(crate) struct HostOutput {
    /// The read's own memory; empty where it is lent.
    data: std::cell::UnsafeCell<Vec<u8>>,
    ptr: *mut u8,
    len: usize,
    /// Whether the memory is the read's own, which starts zeroed: zero
    /// fills then need no writing.
    owned: bool,
}

// SAFETY: tasks write disjoint byte ranges (one box per chunk, the boxes of a
// plan do not overlap), and the vector is only taken back after all tasks
// end; lent memory is written only while the read holds it.
unsafe impl Send for HostOutput {}
unsafe impl Sync for HostOutput {}

impl HostOutput {
    /// `len` zero bytes for an output of `shape`, backed by huge pages where
    /// the kernel allows: a fresh output is faulted in as the chunks are
    /// decoded into it, and 4 KiB pages cost a fault each.
    /// [`ReadError::OutputTooLarge`] when the allocator refuses.
    pub(super) fn allocate(shape: &[u64], len: usize) -> Result<Self, ReadError> {
        let mut data = super::limits::try_zeroed(len).ok_or_else(|| ReadError::OutputTooLarge {
            shape: shape.to_vec(),
            bytes: len as u128,
            reason: "the allocator refused it".into(),
            source: None,
        })?;
        crate::host_memory::advise_huge_pages(&mut data);
        let ptr = data.as_mut_ptr();
        Ok(Self {
            data: std::cell::UnsafeCell::new(data),
            ptr,
            len,
            owned: true,
        })
    }

    /// The caller's memory `bytes`, whatever it holds: every byte of it is
    /// written, fills too.
    ///
    /// # Safety
    /// `bytes` must stay valid, and untouched by anything else, for as long
    /// as the output is written: the output does not borrow it.
    pub(super) unsafe fn lent(bytes: &mut [u8]) -> Self {
        Self {
            data: std::cell::UnsafeCell::new(Vec::new()),
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            owned: false,
        }
    }

    /// Bytes of the output.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The bytes (none where the memory is lent).
    pub(super) fn into_vec(self) -> Vec<u8> {
        self.data.into_inner()
    }

    /// The result of a read of `shape` into this output: the bytes where
    /// they are the read's own, `None` where the memory is lent.
    pub(super) fn into_data(self, shape: Vec<u64>, data_type: DataType) -> Option<ArrayData> {
        let owned = self.owned;
        owned.then(|| ArrayData::Host {
            bytes: self.into_vec(),
            shape,
            data_type,
        })
    }

    /// Copies rows of `copy` from `src` into the output.
    ///
    /// # Safety
    /// No other thread may touch the destination rows meanwhile.
    pub(crate) unsafe fn copy_from(&self, src: &[u8], copy: &BoxCopy) {
        copy.for_each_row(|s, d| {
            assert!(
                s + copy.width <= src.len() && d + copy.width <= self.len,
                "box copy out of bounds"
            );
            // SAFETY: bounds checked above; the caller guarantees exclusivity.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(s), self.ptr.add(d), copy.width) };
        });
    }

    /// Fills the destination rows of `copy` with repetitions of `pattern`
    /// (one element), in place: nothing is allocated, and a zero pattern
    /// writes nothing where the output starts zeroed (its untouched pages
    /// stay unmapped).
    ///
    /// # Safety
    /// As [`Self::copy_from`].
    unsafe fn fill(&self, copy: &BoxCopy, pattern: &[u8]) {
        if self.owned && fill_is_zero(pattern) {
            return;
        }
        copy.for_each_row(|_, d| {
            // SAFETY: the caller guarantees exclusivity of the rows.
            let row = unsafe { self.slice_mut(d, copy.width) };
            fill_pattern(row, pattern);
        });
    }

    /// The output bytes `offset..offset + len`.
    ///
    /// # Safety
    /// As [`Self::copy_from`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds; exclusivity is the caller's.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }
}

/// Fills `row` with repetitions of `pattern`: one copy, then doubling copies
/// of what is written.
fn fill_pattern(row: &mut [u8], pattern: &[u8]) {
    let first = pattern.len().min(row.len());
    row[..first].copy_from_slice(&pattern[..first]);
    let mut done = first;
    while done < row.len() {
        let n = done.min(row.len() - done);
        row.copy_within(..n, done);
        done += n;
    }
}

/// The CPU's [`WaveDecoder`]: decodes the items of a wave in parallel on
/// rayon's threads, each straight into the output where it is one run of it,
/// else into a scratch buffer of its thread and copied from there. Memory
/// stays bounded by one decoded item per thread, however large the wave
/// decodes. The chain's element filters are undone on each decoded item
/// where it was decoded, before it is placed; a `fixedscaleoffset` widens
/// the decoded item from the scratch into the output, or into a second
/// scratch buffer that is copied. Blosc chunks are decoded whole
/// by c-blosc, after their structure is checked ([`crate::blosc::cpu`]).
pub(crate) struct HostWaves {
    /// The codec of the streams; `None` for blosc chunks.
    codec: Option<BatchCodec>,
    out: HostOutput,
    fill: Vec<u8>,
    /// The chain's filters: its element filters undone on each decoded
    /// item, which its `fixedscaleoffset` then widens, before it is placed.
    filters: Filters,
}

impl HostWaves {
    /// A decoder of `codec` into `out`; the places of missing items get
    /// `fill` (one element).
    pub(super) fn new(
        codec: WaveCodec,
        max_decoded_size: u64,
        out: HostOutput,
        fill: Vec<u8>,
    ) -> Result<Self, ReadError> {
        Ok(Self {
            codec: match codec {
                WaveCodec::Algorithm(algorithm) => {
                    Some(BatchCodec::new(algorithm, Backend::Cpu)?.with_max_decoded_size(max_decoded_size))
                }
                WaveCodec::Blosc => None,
            },
            out,
            fill,
            filters: Filters::default(),
        })
    }

    /// The decoder, undoing the chain's `filters` on each decoded item before
    /// it is placed.
    pub(super) fn with_filters(self, filters: Filters) -> Self {
        Self { filters, ..self }
    }

    /// The output.
    pub(super) fn into_output(self) -> HostOutput {
        self.out
    }

    /// Decodes `stream` into `target`, exactly its size, checks the decoded
    /// bytes' Adler-32 where the item has one, and undoes the filters.
    fn decode_into(&self, item: &WaveItem<'_>, stream: &[u8], target: &mut [u8]) -> Result<(), ReadError> {
        self.decode_only(item, stream, target)?;
        self.filters.elements.apply(target);
        Ok(())
    }

    /// [`Self::decode_into`] but for the filters.
    fn decode_only(&self, item: &WaveItem<'_>, stream: &[u8], target: &mut [u8]) -> Result<(), ReadError> {
        let Some(codec) = &self.codec else {
            return crate::blosc::cpu::decode_into(stream, target).map_err(|reason| ReadError::Corrupt {
                key: item.key.to_string(),
                reason,
            });
        };
        codec
            .decode_batch_into(&[stream], &mut [&mut *target])
            .map_err(|e| item_error(e, |_| item.key.to_string()))?;
        if let Some(stored) = item.adler32 {
            let computed = simd_adler32::adler32(&&*target);
            if stored != computed {
                return Err(ReadError::Corrupt {
                    key: item.key.to_string(),
                    reason: ContentCheck::ZlibAdler32(stored).mismatch_reason(computed),
                });
            }
        }
        Ok(())
    }
}

impl WaveDecoder for HostWaves {
    /// At most [`CPU_WAVE_BYTES_PER_THREAD`](crate::array::geometry::limits::CPU_WAVE_BYTES_PER_THREAD) per thread of rayon's pool.
    fn wave_bytes(&self, requested: usize) -> usize {
        crate::array::geometry::limits::cpu_wave_bytes(requested)
    }

    fn decode_wave(&self, wave: &[WaveItem<'_>]) -> Result<(), ReadError> {
        // The error reported is that of the wave's first failing chunk.
        let decoded = crate::pool::collect_in_order(wave.par_iter().map_init(
            Scratch::default,
            |scratch: &mut Scratch, item| {
                let Some(stream) = item.stream else {
                    // SAFETY: the places of a read's items are disjoint.
                    unsafe { self.out.fill(item.place, &self.fill) };
                    return Ok(());
                };
                let Scratch {
                    decoded: scratch,
                    widened,
                } = scratch;
                if let Some(widen) = &self.filters.scale_offset {
                    scratch.resize(item.decoded_len, 0);
                    self.decode_into(item, stream, scratch)?;
                    let len = widen.decoded_len(item.decoded_len);
                    if item.is_whole_run_of(len) {
                        // SAFETY: as above.
                        widen.apply(scratch, unsafe { self.out.slice_mut(item.place.dst_offset, len) });
                        return Ok(());
                    }
                    widened.resize(len, 0);
                    widen.apply(scratch, widened);
                    // SAFETY: as above.
                    unsafe { self.out.copy_from(widened, item.place) };
                    return Ok(());
                }
                if item.is_whole_run() {
                    // SAFETY: as above.
                    let target = unsafe { self.out.slice_mut(item.place.dst_offset, item.decoded_len) };
                    return self.decode_into(item, stream, target);
                }
                scratch.resize(item.decoded_len, 0);
                self.decode_into(item, stream, scratch)?;
                // SAFETY: as above.
                unsafe { self.out.copy_from(scratch, item.place) };
                Ok(())
            },
        ));
        decoded.map(drop)
    }
}

/// One thread's buffers: an item's decoded bytes, and their widened floats
/// where a `fixedscaleoffset` widens them.
#[derive(Default)]
struct Scratch {
    decoded: Vec<u8>,
    widened: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_repeat_the_element_in_place() {
        let mut row = [0u8; 11];
        fill_pattern(&mut row, &[1, 2, 3, 4]);
        assert_eq!(row, [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3]);
        let out = HostOutput::allocate(&[4, 6], 48).unwrap();
        // Rows 1..3 of a 4x6 output of 2-byte elements, columns 2..5.
        let copy = BoxCopy::new(&[4, 6], &[0, 0], &[4, 6], &[1, 2], &[2, 3], 2);
        // SAFETY: no other thread uses the output.
        unsafe { out.fill(&copy, &[7, 9]) };
        let expected: Vec<u8> = (0..48)
            .map(|i| {
                let (r, c) = (i / 12, (i % 12) / 2);
                let inside = (1..3).contains(&r) && (2..5).contains(&c);
                if inside {
                    [7, 9][i % 2]
                } else {
                    0
                }
            })
            .collect();
        assert_eq!(out.into_vec(), expected);

        // Zero fills are written into lent memory, which need not be zeroed.
        let mut lent = [0xa5u8; 48];
        // SAFETY: `lent` outlives the output, and nothing else touches it.
        let out = unsafe { HostOutput::lent(&mut lent) };
        // SAFETY: no other thread uses the output.
        unsafe { out.fill(&copy, &[0, 0]) };
        drop(out);
        let zeroed = lent.iter().enumerate().filter(|(_, b)| **b == 0).map(|(i, _)| i);
        let inside: Vec<usize> = (0..48)
            .filter(|i| (1..3).contains(&(i / 12)) && (2..5).contains(&((i % 12) / 2)))
            .collect();
        assert_eq!(zeroed.collect::<Vec<_>>(), inside);
    }

    #[test]
    fn waves_place_decoded_and_missing_items() {
        let algorithm: crate::Algorithm = "zstd".parse().unwrap();
        let codec = BatchCodec::new(algorithm, Backend::Cpu).unwrap();
        let (a, b): (Vec<u8>, Vec<u8>) = ((0..12).collect(), (100..112).collect());
        let encoded = codec.encode_batch(&[&a, &b]).unwrap();
        // A 4x6 output of 1-byte elements: chunk a whole in rows 0..2, columns
        // 1..4 of chunk b in rows 2..4, a missing chunk's column in column 0.
        let whole = BoxCopy::new(&[2, 6], &[0, 0], &[4, 6], &[0, 0], &[2, 6], 1);
        let part = BoxCopy::new(&[2, 6], &[0, 1], &[4, 6], &[2, 1], &[2, 3], 1);
        let column = BoxCopy::new(&[2, 6], &[0, 0], &[4, 6], &[2, 0], &[2, 1], 1);
        let item = |key, stream, place| WaveItem {
            key,
            stream,
            decoded_len: 12,
            place,
            adler32: None,
        };
        let wave = [
            item("c/0", Some(encoded.get(0)), &whole),
            item("c/1", Some(encoded.get(1)), &part),
            item("c/2", None, &column),
        ];
        assert!(wave[0].is_whole_run() && !wave[1].is_whole_run());
        let new = || HostOutput::allocate(&[4, 6], 24).unwrap();
        let decoder = HostWaves::new(WaveCodec::Algorithm(algorithm), 1 << 20, new(), vec![9]).unwrap();
        decoder.decode_wave(&wave).unwrap();
        let mut expected = a.clone();
        expected.extend([9, 101, 102, 103, 0, 0, 9, 107, 108, 109, 0, 0]);
        assert_eq!(decoder.into_output().into_vec(), expected);

        // Lent memory: the placed bytes are written over what it held, the
        // rest left as it was.
        let mut lent = [0xa5u8; 24];
        // SAFETY: `lent` outlives the decoder, and nothing else touches it.
        let decoder = HostWaves::new(
            WaveCodec::Algorithm(algorithm),
            1 << 20,
            unsafe { HostOutput::lent(&mut lent) },
            vec![9],
        )
        .unwrap();
        decoder.decode_wave(&wave).unwrap();
        drop(decoder);
        let mut expected = a.clone();
        expected.extend([9, 101, 102, 103, 0xa5, 0xa5, 9, 107, 108, 109, 0xa5, 0xa5]);
        assert_eq!(lent.to_vec(), expected);

        let decoder = HostWaves::new(WaveCodec::Algorithm(algorithm), 1 << 20, new(), vec![9]).unwrap();
        let short = WaveItem {
            decoded_len: 13,
            ..wave[1]
        };
        match decoder.decode_wave(&[wave[0], short]) {
            Err(ReadError::ChunkSize { key, expected, actual }) => {
                assert_eq!((key.as_str(), expected, actual), ("c/1", 13, 12));
            }
            other => panic!("{other:?}"),
        }
        let checked = WaveItem {
            adler32: Some(simd_adler32::adler32(&a.as_slice()) ^ 1),
            ..wave[0]
        };
        match decoder.decode_wave(&[checked]) {
            Err(ReadError::Corrupt { key, reason }) => {
                assert!(key == "c/0" && reason.contains("zlib Adler-32 mismatch"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
