//! The input scratch of one batched nvCOMP call, and how bytes reach it.
//!
//! nvCOMP's batched calls read arrays of per-chunk pointers and sizes from
//! device memory. An engine lays them out at the start of its input scratch
//! ([`Table`]: input pointers, input sizes, output pointers, output sizes, `n`
//! 64-bit words each), stages the compressed inputs that cannot be read in
//! place behind the table (every host input, and device inputs nvCOMP's
//! alignment or isolation rules out), and leaves room after them for the
//! per-chunk results ([`InputArea`]). Host bytes go up, and come back, in
//! transfer groups ([`transfer_groups`]), so that the CPU's copies into and
//! out of pinned memory overlap the transfers.

use std::ops::Range;

use rayon::prelude::*;

use super::chunking;
use super::copies::Copy;
use super::fetch_arena::{ArenaSpan, SLOT_ALIGN};
use super::isolation::Layout;
use super::memory::PinnedBuffer;
use super::DeviceRegion;

/// Alignment of the table and of the per-chunk results.
const TABLE_ALIGN: usize = 256;

/// Bytes moved between host and device per copy when staging or returning a
/// batch: small enough that the CPU's copies overlap the transfers, large
/// enough that each transfer runs at full speed.
const TRANSFER_GROUP: usize = 64 << 20;

/// Marks an input address as an offset into the input scratch.
const STAGED: u64 = 1 << 63;

/// Where a batch's compressed bytes are.
#[derive(Clone, Copy)]
pub(super) enum Inputs<'a> {
    /// Host buffers.
    Host(&'a [&'a [u8]]),
    /// Regions of this engine's device memory.
    Device(&'a [DeviceRegion]),
}

impl<'a> Inputs<'a> {
    /// Number of buffers.
    pub(super) fn len(&self) -> usize {
        match self {
            Inputs::Host(b) => b.len(),
            Inputs::Device(r) => r.len(),
        }
    }
}

/// Splits `0..sizes.len()` into consecutive groups of about [`TRANSFER_GROUP`] bytes.
pub(super) fn transfer_groups(sizes: impl Iterator<Item = usize>) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut bytes, mut end) = (0, 0, 0);
    for (i, size) in sizes.enumerate() {
        bytes += size;
        end = i + 1;
        if bytes >= TRANSFER_GROUP {
            groups.push(start..end);
            (start, bytes) = (end, 0);
        }
    }
    if start < end {
        groups.push(start..end);
    }
    groups
}

/// The table nvCOMP reads: four arrays of `n` 64-bit words.
pub(super) struct Table<'a> {
    words: &'a mut [u64],
    n: usize,
}

impl Table<'_> {
    pub(super) const IN_PTRS: usize = 0;
    pub(super) const IN_BYTES: usize = 1;
    pub(super) const OUT_PTRS: usize = 2;
    pub(super) const OUT_BYTES: usize = 3;

    /// Bytes the table of `n` chunks takes, aligned.
    pub(super) fn bytes(n: usize) -> usize {
        chunking::align_up(4 * 8 * n, TABLE_ALIGN)
    }

    /// The table of `n` chunks at the start of `pinned`.
    pub(super) fn of(pinned: &mut PinnedBuffer, n: usize) -> Table<'_> {
        let bytes = &mut pinned.as_mut_slice()[..4 * 8 * n];
        // SAFETY: pinned memory is page aligned, so 8-byte aligned; any bits are valid u64.
        let words = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u64>(), 4 * n) };
        Table { words, n }
    }

    /// Sets entry `k` of `array` (one of the `IN_*`, `OUT_*` constants).
    pub(super) fn set(&mut self, array: usize, k: usize, value: u64) {
        self.words[array * self.n + k] = value;
    }

    /// Word `k` of `array`.
    pub(super) fn get(&self, array: usize, k: usize) -> u64 {
        self.words[array * self.n + k]
    }
}

/// The per-chunk results nvCOMP writes: sizes then statuses.
pub(super) fn results_bytes(n: usize) -> usize {
    chunking::align_up(12 * n, TABLE_ALIGN)
}

/// Where each chunk's compressed bytes are read from: in place on the device,
/// or staged in the input scratch behind the table.
pub(super) struct Staging {
    /// Per chunk: its device address, or with [`STAGED`] set its offset in
    /// the input scratch.
    addrs: Vec<u64>,
    /// Per staged chunk, in order: its offset in the input scratch.
    pub(super) offsets: Vec<usize>,
    /// Where the staged bytes end in the input scratch (the table's end if
    /// nothing is staged).
    pub(super) end: usize,
}

impl Staging {
    /// Places `chunks`, each its device address (`None` where it must be
    /// staged) and length: chunks at an address aligned to `align` are read
    /// in place, the others staged at aligned offsets behind the table.
    pub(super) fn plan(n: usize, align: usize, chunks: impl IntoIterator<Item = (Option<u64>, usize)>) -> Self {
        let mut addrs = Vec::with_capacity(n);
        let mut offsets = Vec::new();
        let mut end = Table::bytes(n);
        for (direct, len) in chunks {
            match direct {
                Some(addr) if addr % align as u64 == 0 => addrs.push(addr),
                _ => {
                    end = chunking::align_up(end, align);
                    offsets.push(end);
                    addrs.push(end as u64 | STAGED);
                    end += len;
                }
            }
        }
        Self { addrs, offsets, end }
    }

    /// Places host chunks that all lie in `span` of a fetch arena, which is
    /// uploaded whole behind the table (its mirror): `chunks` are each one's
    /// host address and length. A chunk whose address is aligned to `align`
    /// is read where it lies in the mirror, since the mirror keeps every
    /// address's offset from a [`SLOT_ALIGN`] boundary; the others are moved
    /// to aligned offsets behind the mirror, by the returned copies (offsets
    /// into the input scratch).
    pub(super) fn mirrored(
        n: usize,
        align: usize,
        span: ArenaSpan,
        chunks: impl IntoIterator<Item = (u64, usize)>,
    ) -> (Self, Vec<Move>) {
        let mirror_at = Self::mirror_at(n);
        let mut addrs = Vec::with_capacity(n);
        let mut moves = Vec::new();
        let mut end = mirror_at + span.len;
        for (addr, len) in chunks {
            let at = mirror_at + (addr - span.start) as usize;
            if align <= SLOT_ALIGN && addr % align as u64 == 0 {
                addrs.push(at as u64 | STAGED);
            } else {
                end = chunking::align_up(end, align);
                moves.push(Move { from: at, to: end, len });
                addrs.push(end as u64 | STAGED);
                end += len;
            }
        }
        let staging = Self {
            addrs,
            offsets: Vec::new(),
            end,
        };
        (staging, moves)
    }

    /// Where the mirror of a fetch arena's span starts in the input scratch
    /// of `n` chunks ([`Staging::mirrored`]).
    pub(super) fn mirror_at(n: usize) -> usize {
        Table::bytes(n)
    }

    /// Chunk `k`'s device address, the input scratch being at `dev_in`.
    pub(super) fn address(&self, k: usize, dev_in: u64) -> u64 {
        let a = self.addrs[k];
        if a & STAGED != 0 {
            dev_in + (a & !STAGED)
        } else {
            a
        }
    }

    /// Where the per-chunk results start in the input scratch.
    pub(super) fn results_at(&self) -> usize {
        chunking::align_up(self.end, TABLE_ALIGN)
    }

    /// The device copies that stage device chunks, `sources[k]` being chunk
    /// `k`'s device address: one per staged chunk, from its source to its
    /// place in the input scratch at `dev_in`.
    pub(super) fn device_copies(&self, dev_in: u64, sources: impl IntoIterator<Item = (u64, usize)>) -> Vec<Copy> {
        sources
            .into_iter()
            .zip(&self.addrs)
            .filter(|(_, a)| *a & STAGED != 0)
            .map(|((src, len), a)| Copy {
                dst: dev_in + (a & !STAGED),
                src,
                len,
            })
            .collect()
    }
}

/// A copy within the input scratch: `len` bytes from offset `from` to
/// offset `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Move {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) len: usize,
}

/// The input scratch of one call of `n` chunks as nvCOMP sees it, at device
/// address `base`: [`Table`], the staged inputs, then at `results_at` the
/// per-chunk results, `n` 64-bit sizes then `n` 32-bit statuses.
#[derive(Debug, Clone, Copy)]
pub(super) struct InputArea {
    pub(super) base: u64,
    pub(super) n: usize,
    pub(super) results_at: usize,
}

impl InputArea {
    /// Device address of one of [`Table`]'s arrays.
    pub(super) fn array(&self, array: usize) -> u64 {
        self.base + (array * 8 * self.n) as u64
    }

    /// Device address of the sizes nvCOMP reports.
    pub(super) fn actual_bytes(&self) -> u64 {
        self.base + self.results_at as u64
    }

    /// Device address of the statuses nvCOMP reports.
    pub(super) fn statuses(&self) -> u64 {
        self.actual_bytes() + 8 * self.n as u64
    }

    /// The same places as offsets into the input scratch, for the worker.
    pub(super) fn worker_layout(&self) -> Layout {
        let offset = |address: u64| address - self.base;
        Layout {
            in_ptrs: offset(self.array(Table::IN_PTRS)),
            in_bytes: offset(self.array(Table::IN_BYTES)),
            out_ptrs: offset(self.array(Table::OUT_PTRS)),
            out_bytes: offset(self.array(Table::OUT_BYTES)),
            actual_bytes: offset(self.actual_bytes()),
            statuses: offset(self.statuses()),
        }
    }
}

/// Copies `srcs[i]` to `dst[offsets[i]..]` in parallel.
pub(super) fn scatter_into(dst: &mut [u8], offsets: &[usize], srcs: &[&[u8]]) {
    let mut parts: Vec<(&mut [u8], &[u8])> = Vec::with_capacity(srcs.len());
    let mut rest = dst;
    let mut consumed = 0;
    for (&off, &src) in offsets.iter().zip(srcs) {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - consumed);
        let (head, tail) = tail.split_at_mut(src.len());
        parts.push((head, src));
        rest = tail;
        consumed = off + src.len();
    }
    parts.into_par_iter().for_each(|(d, s)| d.copy_from_slice(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_groups_cover_every_buffer_once() {
        let sizes = [TRANSFER_GROUP - 1, 1, 5, TRANSFER_GROUP * 2, 0, 7];
        let groups = transfer_groups(sizes.iter().copied());
        assert_eq!(groups, vec![0..2, 2..4, 4..6]);
        assert!(transfer_groups(std::iter::empty()).is_empty());
        assert_eq!(transfer_groups([0, 0].into_iter()), vec![0..2]);
    }

    #[test]
    fn aligned_device_chunks_are_read_in_place_and_the_rest_staged_behind_the_table() {
        let chunks = [(None, 10), (Some(0x1000), 5), (Some(0x2003), 7), (None, 1)];
        let staging = Staging::plan(4, 16, chunks);
        let table = Table::bytes(4);
        assert_eq!(staging.offsets, vec![table, table + 16, table + 32]);
        assert_eq!(staging.end, table + 33);
        assert_eq!(staging.results_at(), chunking::align_up(table + 33, TABLE_ALIGN));
        let dev_in = 0x10_0000;
        let addresses: Vec<u64> = (0..4).map(|k| staging.address(k, dev_in)).collect();
        let staged = |offset: usize| dev_in + offset as u64;
        assert_eq!(
            addresses,
            [staged(table), 0x1000, staged(table + 16), staged(table + 32)]
        );
        let sources = [(0xa000, 10), (0x1000, 5), (0x2003, 7), (0xb000, 1)];
        let copies: Vec<(u64, u64, usize)> = staging
            .device_copies(dev_in, sources)
            .iter()
            .map(|c| (c.dst, c.src, c.len))
            .collect();
        assert_eq!(
            copies,
            [
                (staged(table), 0xa000, 10),
                (staged(table + 16), 0x2003, 7),
                (staged(table + 32), 0xb000, 1)
            ]
        );
    }

    #[test]
    fn mirrored_chunks_are_read_where_they_lie_unless_misaligned() {
        let table = Table::bytes(4);
        let span = ArenaSpan {
            start: 0x7f00_0000_0000,
            len: 3000,
        };
        let at = |offset: u64| span.start + offset;
        let chunks = [(at(0), 100), (at(512), 40), (at(516), 20), (at(2990), 10)];
        let (staging, moves) = Staging::mirrored(4, 8, span, chunks);
        let mirror = table;
        let behind = chunking::align_up(mirror + span.len, 8);
        assert_eq!(
            moves,
            [
                Move {
                    from: mirror + 516,
                    to: behind,
                    len: 20
                },
                Move {
                    from: mirror + 2990,
                    to: behind + 24,
                    len: 10
                }
            ]
        );
        assert_eq!(staging.end, behind + 34);
        let dev_in = 0x10_0000;
        let addresses: Vec<u64> = (0..4).map(|k| staging.address(k, dev_in)).collect();
        let inside = |offset: usize| dev_in + offset as u64;
        assert_eq!(
            addresses,
            [
                inside(mirror),
                inside(mirror + 512),
                inside(behind),
                inside(behind + 24)
            ]
        );
        // An alignment above the slots' is never assumed of a chunk.
        let (_, moves) = Staging::mirrored(4, 2 * SLOT_ALIGN, span, chunks);
        assert_eq!(moves.len(), 4);
    }

    #[test]
    fn the_worker_layout_is_the_input_area_less_its_base() {
        let area = InputArea {
            base: 0x7000_0000,
            n: 3,
            results_at: 512,
        };
        let layout = area.worker_layout();
        assert_eq!(
            [layout.in_ptrs, layout.in_bytes, layout.out_ptrs, layout.out_bytes],
            [0, 24, 48, 72]
        );
        assert_eq!((layout.actual_bytes, layout.statuses), (512, 536));
        assert_eq!(area.array(Table::OUT_BYTES), 0x7000_0000 + 72);
        assert_eq!(area.statuses(), 0x7000_0000 + 536);
    }
}
