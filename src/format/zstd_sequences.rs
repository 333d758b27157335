//! The sequences section of a compressed Zstandard block (RFC 8878,
//! 3.1.1.3.2 and 3.1.1.4), decoded as libzstd decodes it but without
//! copying a byte: what is checked is where each sequence reads and writes.
//!
//! ```text
//! header:    number of sequences: 1 byte (< 128), 2 bytes (first 128-254:
//!            (b0 - 128) << 8 | b1), or 3 bytes (0xFF, then u16 LE + 0x7F00);
//!            when not 0, one byte of modes: bits 7-6 literal lengths, 5-4
//!            offsets, 3-2 match lengths (0 predefined, 1 RLE: one symbol
//!            byte follows, 2 FSE: a table description follows, 3 repeat the
//!            frame's previous table), bits 1-0 reserved (0)
//! bitstream: one backward bit stream: the three initial states (literal
//!            length, offset, match length), then per sequence the offset's,
//!            the match length's and the literal length's extra bits and,
//!            except after the last, the three state updates
//! ```
//!
//! Each sequence copies its literals (they must not run past the section's
//! literals) and then a match of at least 3 bytes from `offset` bytes back.
//! Offset values 1-3 name the repeated offsets, which start a frame as
//! 1, 4 and 8 and carry from block to block. The offset must reach no
//! further back than the frame's output so far, nor than its window; the
//! block, with its last literals, must decode to at most the block maximum;
//! and the last sequence must read the stream's last bit. libzstd rejects
//! everything this rejects, except offsets past the window but within the
//! output and blocks over the maximum, which RFC 8878 forbids and libzstd
//! decodes in some of its buffer layouts: those are refused here, as nvCOMP
//! has no reason to decode them as libzstd does.

use std::ops::Range;
use std::sync::OnceLock;

use super::fse;

mod walk;
pub(crate) use walk::{check_frame_total, walk_frame};

/// A length code table: codes below `short` stand for `code + base` with no
/// extra bits, the `long` codes after them for their (baseline, extra bits).
const fn length_codes<const N: usize>(short: usize, base: u32, long: &[(u32, u8)]) -> [(u32, u8); N] {
    let mut codes = [(0, 0); N];
    let mut c = 0;
    while c < N {
        codes[c] = if c < short {
            (c as u32 + base, 0)
        } else {
            long[c - short]
        };
        c += 1;
    }
    codes
}

/// Literal length codes: (baseline, extra bits).
const LITERAL_LENGTHS: [(u32, u8); 36] = length_codes(
    16,
    0,
    &[
        (16, 1),
        (18, 1),
        (20, 1),
        (22, 1),
        (24, 2),
        (28, 2),
        (32, 3),
        (40, 3),
        (48, 4),
        (64, 6),
        (128, 7),
        (256, 8),
        (512, 9),
        (1024, 10),
        (2048, 11),
        (4096, 12),
        (8192, 13),
        (16384, 14),
        (32768, 15),
        (65536, 16),
    ],
);

/// Match length codes: (baseline, extra bits).
const MATCH_LENGTHS: [(u32, u8); 53] = length_codes(
    32,
    3,
    &[
        (35, 1),
        (37, 1),
        (39, 1),
        (41, 1),
        (43, 2),
        (47, 2),
        (51, 3),
        (59, 3),
        (67, 4),
        (83, 4),
        (99, 5),
        (131, 7),
        (259, 8),
        (515, 9),
        (1027, 10),
        (2051, 11),
        (4099, 12),
        (8195, 13),
        (16387, 14),
        (32771, 15),
        (65539, 16),
    ],
);

/// Largest offset code: its value is `(1 << code) + extra`, `code` extra bits.
const MAX_OFFSET_CODE: usize = 31;

/// The predefined distributions (RFC 8878, 3.1.1.3.2.2) and their logs.
const LITERAL_LENGTHS_DEFAULT: (u32, [i16; 36]) = (
    6,
    [
        4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1,
    ],
);
const MATCH_LENGTHS_DEFAULT: (u32, [i16; 53]) = (
    6,
    [
        1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
    ],
);
const OFFSETS_DEFAULT: (u32, [i16; 29]) = (
    5,
    [
        1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1,
    ],
);

/// One decoding state: the value its symbol stands for (the baseline; for
/// offsets `1 << code`), its extra bits, and the next state's bits and base.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    baseline: u32,
    extra: u8,
    bits: u8,
    next: u16,
}

/// A decoding table of one of the three kinds of symbols.
#[derive(Debug, Clone, Default)]
struct Table {
    log: u32,
    entries: Vec<Entry>,
}

/// The three kinds of symbols.
#[derive(Debug, Clone, Copy)]
enum Kind {
    LiteralLength,
    Offset,
    MatchLength,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::LiteralLength => "literal length",
            Kind::Offset => "offset",
            Kind::MatchLength => "match length",
        }
    }

    fn max_symbol(self) -> usize {
        match self {
            Kind::LiteralLength => LITERAL_LENGTHS.len() - 1,
            Kind::Offset => MAX_OFFSET_CODE,
            Kind::MatchLength => MATCH_LENGTHS.len() - 1,
        }
    }

    fn max_log(self) -> u32 {
        match self {
            Kind::Offset => 8,
            _ => 9,
        }
    }

    fn code(self, symbol: usize) -> (u32, u8) {
        match self {
            Kind::LiteralLength => LITERAL_LENGTHS[symbol],
            Kind::MatchLength => MATCH_LENGTHS[symbol],
            Kind::Offset => (1 << symbol, symbol as u8),
        }
    }

    fn table(self, log: u32, counts: &[i16]) -> Result<Table, String> {
        let states = fse::decoding_table(log, counts)?;
        let entries = states
            .iter()
            .map(|s| {
                let (baseline, extra) = self.code(usize::from(s.symbol));
                Entry {
                    baseline,
                    extra,
                    bits: s.bits,
                    next: s.base,
                }
            })
            .collect();
        Ok(Table { log, entries })
    }

    /// The three kinds, in the order of a section's modes and tables.
    const ALL: [Kind; 3] = [Kind::LiteralLength, Kind::Offset, Kind::MatchLength];

    /// The accuracy log and counts of the predefined distribution.
    fn predefined_distribution(self) -> (u32, &'static [i16]) {
        match self {
            Kind::LiteralLength => (LITERAL_LENGTHS_DEFAULT.0, &LITERAL_LENGTHS_DEFAULT.1),
            Kind::Offset => (OFFSETS_DEFAULT.0, &OFFSETS_DEFAULT.1),
            Kind::MatchLength => (MATCH_LENGTHS_DEFAULT.0, &MATCH_LENGTHS_DEFAULT.1),
        }
    }

    fn predefined(self) -> &'static Table {
        static TABLES: OnceLock<[Table; 3]> = OnceLock::new();
        let tables = TABLES.get_or_init(|| {
            Kind::ALL.map(|kind| {
                let (log, counts) = kind.predefined_distribution();
                kind.table(log, counts).expect("predefined")
            })
        });
        &tables[self as usize]
    }
}

/// How a block's sequences section gives one kind of symbol its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TableSource {
    /// The predefined distribution.
    Predefined,
    /// One symbol for every sequence: no bits read.
    Rle(u8),
    /// The distribution the section describes: its accuracy log and counts.
    Counts {
        /// The accuracy log.
        log: u32,
        /// The normalised count of each symbol, -1 for "less than one".
        counts: Vec<i16>,
    },
    /// The table of the frame's previous block with sequences.
    Repeat,
}

impl TableSource {
    /// The accuracy log and counts of a distribution of the `kind`-th kind
    /// (literal lengths, offsets, match lengths; `None` for RLE and
    /// repeated tables).
    pub(crate) fn distribution(&self, kind: usize) -> Option<(u32, &[i16])> {
        match self {
            TableSource::Predefined => Some(Kind::ALL[kind].predefined_distribution()),
            TableSource::Counts { log, counts } => Some((*log, counts)),
            TableSource::Rle(_) | TableSource::Repeat => None,
        }
    }
}

/// The sequences of one compressed block, read up to their bit stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockSequences {
    /// Where the block's header lies in its frame, for errors.
    pub(crate) at: usize,
    /// Bytes the frame decodes to before this block's literals that no
    /// earlier block with sequences accounts for: raw and RLE blocks, and
    /// blocks of literals only, since the previous block with sequences.
    pub(crate) gap: u64,
    /// The bit stream, bytes of the buffer (at least one, its last not 0).
    pub(crate) stream: Range<usize>,
    /// Number of sequences.
    pub(crate) count: u32,
    /// The block's literals, which the sequences copy out.
    pub(crate) literals: u32,
    /// The tables of the literal lengths, offsets and match lengths.
    pub(crate) tables: [TableSource; 3],
}

/// The blocks with sequences of one frame, in order, and what their walk is
/// checked against: walked on the host ([`walk_frame`]) or on the device
/// (`cuda::sequences`), one frame at a time, since repeated offsets and
/// tables carry from block to block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrameSequences {
    /// Where the frame starts in its buffer, for errors.
    pub(crate) at: usize,
    /// The frame's window size.
    pub(crate) window: u64,
    /// The most a block decodes to.
    pub(crate) block_size_max: u64,
    /// The content size the frame declares.
    pub(crate) content_size: Option<u64>,
    /// Its blocks with sequences.
    pub(crate) blocks: Vec<BlockSequences>,
    /// Bytes it decodes to after the last of them.
    pub(crate) tail: u64,
}

impl FrameSequences {
    /// The number of sequences of its blocks: what its walk costs.
    pub(crate) fn sequences(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.count)).sum()
    }
}

/// Reads the header and table descriptions of the sequences section
/// `buf[section]` of the block at byte `at` of its frame, whose literals
/// section holds `literals` literals; `repeatable`: whether an earlier
/// block of the frame had sequences, whose tables may be repeated. `None`:
/// the block has no sequences. Its [`BlockSequences::gap`] is left 0.
pub(crate) fn read_section(
    buf: &[u8],
    section: Range<usize>,
    (at, literals): (usize, u32),
    repeatable: bool,
) -> Result<Option<BlockSequences>, String> {
    let bytes = &buf[section.clone()];
    let (&first, mut rest) = bytes.split_first().ok_or("no sequences section")?;
    let count = match first {
        0..=0x7F => u32::from(first),
        0xFF => {
            let n = rest.get(..2).ok_or("sequences header truncated")?;
            rest = &rest[2..];
            u32::from(u16::from_le_bytes([n[0], n[1]])) + 0x7F00
        }
        _ => {
            let (&low, tail) = rest.split_first().ok_or("sequences header truncated")?;
            rest = tail;
            (u32::from(first - 0x80) << 8) + u32::from(low)
        }
    };
    if count == 0 {
        if !rest.is_empty() {
            return Err("bytes after a sequences section of no sequences".into());
        }
        return Ok(None);
    }
    let (&modes, tail) = rest.split_first().ok_or("sequences header truncated")?;
    rest = tail;
    if modes & 3 != 0 {
        return Err("reserved bits of the sequences' modes are set".into());
    }
    let mut tables = [
        TableSource::Predefined,
        TableSource::Predefined,
        TableSource::Predefined,
    ];
    for (i, kind) in Kind::ALL.into_iter().enumerate() {
        let mode = (modes >> (6 - 2 * i)) & 3;
        let (table, used) = table_source(kind, mode, rest, repeatable)?;
        tables[i] = table;
        rest = &rest[used..];
    }
    match rest.last() {
        None => return Err("sequences' empty bit stream".into()),
        Some(0) => return Err("sequences' bit stream has no end mark".into()),
        Some(_) => {}
    }
    Ok(Some(BlockSequences {
        at,
        gap: 0,
        stream: section.end - rest.len()..section.end,
        count,
        literals,
        tables,
    }))
}

/// Where `mode` has `kind` find its table, from the header bytes `header`,
/// and the bytes it takes.
fn table_source(kind: Kind, mode: u8, header: &[u8], repeatable: bool) -> Result<(TableSource, usize), String> {
    match mode {
        0 => Ok((TableSource::Predefined, 0)),
        1 => {
            let &symbol = header
                .first()
                .ok_or_else(|| format!("{} RLE symbol missing", kind.name()))?;
            if usize::from(symbol) > kind.max_symbol() {
                return Err(format!("{} RLE symbol {symbol} is out of range", kind.name()));
            }
            Ok((TableSource::Rle(symbol), 1))
        }
        2 => {
            let (log, counts, used) = fse::read_counts(header, kind.max_symbol(), kind.max_log())
                .map_err(|e| format!("{} table: {e}", kind.name()))?;
            Ok((TableSource::Counts { log, counts }, used))
        }
        _ if repeatable => Ok((TableSource::Repeat, 0)),
        _ => Err(format!("{} table repeated before any in the frame", kind.name())),
    }
}

impl Kind {
    /// The table `source` gives this kind, `previous` the one it repeats.
    fn table_of(self, source: &TableSource, previous: Option<&Table>) -> Result<Table, String> {
        match source {
            TableSource::Predefined => Ok(self.predefined().clone()),
            TableSource::Rle(symbol) => {
                let (baseline, extra) = self.code(usize::from(*symbol));
                let entries = vec![Entry {
                    baseline,
                    extra,
                    bits: 0,
                    next: 0,
                }];
                Ok(Table { log: 0, entries })
            }
            TableSource::Counts { log, counts } => self.table(*log, counts),
            TableSource::Repeat => previous
                .cloned()
                .ok_or_else(|| format!("{} table repeated before any in the frame", self.name())),
        }
    }
}
