//! The blosc1 chunk format, parsed on the host into independent decode
//! items for a batched decoder (pure: no I/O, no decoding).
//!
//! # Chunk layout (blosc format version 2, c-blosc 1.x, numcodecs' `Blosc`)
//!
//! | bytes | field |
//! |---|---|
//! | 0 | format version, 2 |
//! | 1 | compressor format version, 1 |
//! | 2 | flags: bit 0 byte shuffle, bit 1 memcpyed, bit 2 bitshuffle, bit 3 reserved (0), bit 4 don't split, bits 5-7 compressor (0 blosclz, 1 LZ4 and LZ4HC, 2 Snappy, 3 zlib, 4 Zstandard) |
//! | 3 | typesize, bytes per element (1-255) |
//! | 4-7 | nbytes, the decoded size (u32 LE) |
//! | 8-11 | blocksize (u32 LE) |
//! | 12-15 | cbytes, the whole chunk's size, header included (u32 LE) |
//!
//! A **memcpyed** chunk (flag bit 1) holds its `nbytes` decoded bytes right
//! after the header, unshuffled; `cbytes` is `nbytes + 16`.
//!
//! Otherwise the decoded bytes are cut into `ceil(nbytes / blocksize)`
//! blocks, the last one shorter when `blocksize` does not divide `nbytes`.
//! After the header, one i32 LE per block gives the offset of the block from
//! the start of the chunk. A block is `nsplits` streams, each an i32 LE
//! compressed size followed by that many bytes; stream `s` decodes to bytes
//! `[s * n, (s + 1) * n)` of the block, `n = block size / nsplits`. A stream
//! whose compressed size equals `n` is stored as is; others are one buffer of
//! the compressor: a raw LZ4 block, raw Snappy, a zlib stream, a Zstandard
//! frame or a blosclz buffer. A block is split into `typesize` streams when
//! the don't-split flag is clear, `typesize <= 16`, the block holds at least
//! 128 elements (`blocksize / typesize >= 128`), and it is not the short
//! last block; otherwise `nsplits` is 1.
//!
//! The decoded block is then unshuffled, block by block:
//! - **byte shuffle** (flag bit 0, `typesize > 1`): byte `j` of element `i`
//!   was stored at `j * m + i`, `m = block size / typesize`; the
//!   `block size % typesize` trailing bytes are stored as they are;
//! - **bitshuffle** (flag bit 2, byte shuffle clear, block size >=
//!   typesize): when `m` is a multiple of 8, bit `k` of byte `j` of element
//!   `i` was stored as bit `i % 8` of byte `(j * 8 + k) * m / 8 + i / 8`,
//!   trailing bytes as they are; when `m` is not a multiple of 8 the block
//!   is stored as it is.
//!
//! [`parse`] checks every size and offset against the chunk and returns the
//! [`BloscItem`]s of all streams and the [`Unshuffle`] to apply to each block.

use std::ops::Range;

/// Bytes of the blosc1 header.
pub(crate) const HEADER_LEN: usize = 16;
/// The blosc format version this parser reads (c-blosc 1.x writes 2).
pub(crate) const FORMAT_VERSION: u8 = 2;
const FLAG_SHUFFLE: u8 = 0x1;
const FLAG_MEMCPYED: u8 = 0x2;
const FLAG_BITSHUFFLE: u8 = 0x4;
const FLAG_RESERVED: u8 = 0x8;
const FLAG_DONT_SPLIT: u8 = 0x10;
const MAX_SPLITS: usize = 16;
const MIN_SPLIT_ELEMENTS: usize = 128;
/// c-blosc's largest block size.
const MAX_BLOCKSIZE: u32 = (i32::MAX as u32 - 255 * 4) / 3;

/// The compressor of a blosc chunk's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BloscCodec {
    /// blosc's own LZ77 (`blosclz`); no GPU decoder.
    BloscLz,
    /// One raw LZ4 block (cnames `lz4` and `lz4hc`).
    Lz4,
    /// Raw Snappy.
    Snappy,
    /// A zlib stream (RFC 1950).
    Zlib,
    /// One Zstandard frame.
    Zstd,
}

/// How a decoded block is unshuffled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    /// Stored as decoded.
    None,
    /// Byte shuffle.
    Byte,
    /// Bitshuffle.
    Bit,
}

/// The fields of a blosc1 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BloscHeader {
    /// Format version (2).
    pub(crate) version: u8,
    /// Compressor format version (1).
    pub(crate) compressor_version: u8,
    /// The flags byte.
    pub(crate) flags: u8,
    /// Bytes per element.
    pub(crate) typesize: u8,
    /// The decoded size.
    pub(crate) nbytes: u32,
    /// The block size.
    pub(crate) blocksize: u32,
    /// The chunk's size, header included.
    pub(crate) cbytes: u32,
}

/// A range of the chunk that decodes, on its own, to bytes of the decoded
/// (still shuffled) chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BloscItem {
    /// The bytes of the chunk to decode.
    pub(crate) src: Range<usize>,
    /// Where the decoded bytes go in the chunk's decoded bytes, before unshuffling.
    pub(crate) dst: Range<usize>,
    /// The compressor, or `None` where the stream is stored as is (a copy).
    pub(crate) codec: Option<BloscCodec>,
}

/// The unshuffle of one block of the decoded chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unshuffle {
    /// The block's bytes in the decoded chunk.
    pub(crate) block: Range<usize>,
    /// The shuffle to undo (never `None`: blocks without one are not listed).
    pub(crate) shuffle: Shuffle,
    /// Bytes per element.
    pub(crate) typesize: usize,
}

/// A blosc chunk cut into decode items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BloscLayout {
    /// The header.
    pub(crate) header: BloscHeader,
    /// Every stream of the chunk, in order; their `dst` ranges tile the
    /// decoded chunk.
    pub(crate) items: Vec<BloscItem>,
    /// The blocks to unshuffle after decoding, with the shuffle of each.
    pub(crate) unshuffles: Vec<Unshuffle>,
}

/// What is wrong with a blosc chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BloscHeaderError {
    /// Shorter than the header.
    #[error("{len} bytes is shorter than the 16-byte blosc header")]
    TooShort {
        /// The chunk's length.
        len: usize,
    },
    /// A format version other than 2.
    #[error("blosc format version {version}; only version 2 (c-blosc 1.x) is read")]
    Version {
        /// The version byte.
        version: u8,
    },
    /// The reserved flag bit is set.
    #[error("blosc flags {flags:#04x} set the reserved bit 3")]
    ReservedFlag {
        /// The flags byte.
        flags: u8,
    },
    /// An unknown compressor code or its format version.
    #[error("unknown blosc compressor {code} (format version {version})")]
    Compressor {
        /// Bits 5-7 of the flags.
        code: u8,
        /// The compressor format version byte.
        version: u8,
    },
    /// Typesize or blocksize zero, or blocksize too large.
    #[error("invalid blosc header: typesize {typesize}, blocksize {blocksize}")]
    Geometry {
        /// The typesize byte.
        typesize: u8,
        /// The block size.
        blocksize: u32,
    },
    /// `cbytes` disagrees with the chunk's length or the memcpyed size.
    #[error("blosc header declares {declared} compressed bytes; {reason}")]
    CompressedSize {
        /// cbytes.
        declared: u32,
        /// What it disagrees with.
        reason: String,
    },
    /// A block offset or stream size points outside the chunk.
    #[error("blosc block {block}: {reason}")]
    Block {
        /// The block's index.
        block: usize,
        /// What is out of bounds.
        reason: String,
    },
}

fn u32_at(chunk: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(chunk[at..at + 4].try_into().expect("four bytes"))
}

impl BloscHeader {
    /// Reads and checks the header of `chunk` against the chunk's length.
    pub(crate) fn parse(chunk: &[u8]) -> Result<Self, BloscHeaderError> {
        if chunk.len() < HEADER_LEN {
            return Err(BloscHeaderError::TooShort { len: chunk.len() });
        }
        let header = Self {
            version: chunk[0],
            compressor_version: chunk[1],
            flags: chunk[2],
            typesize: chunk[3],
            nbytes: u32_at(chunk, 4),
            blocksize: u32_at(chunk, 8),
            cbytes: u32_at(chunk, 12),
        };
        if header.version != FORMAT_VERSION {
            return Err(BloscHeaderError::Version {
                version: header.version,
            });
        }
        if header.flags & FLAG_RESERVED != 0 {
            return Err(BloscHeaderError::ReservedFlag { flags: header.flags });
        }
        if header.cbytes as usize > chunk.len() || (header.cbytes as usize) < HEADER_LEN {
            return Err(BloscHeaderError::CompressedSize {
                declared: header.cbytes,
                reason: format!("the chunk has {} bytes", chunk.len()),
            });
        }
        if header.nbytes > i32::MAX as u32 - HEADER_LEN as u32 {
            return Err(BloscHeaderError::CompressedSize {
                declared: header.cbytes,
                reason: format!("the decoded size {} exceeds blosc's limit", header.nbytes),
            });
        }
        if header.nbytes > 0 && (header.typesize == 0 || header.blocksize == 0 || header.blocksize > MAX_BLOCKSIZE) {
            return Err(BloscHeaderError::Geometry {
                typesize: header.typesize,
                blocksize: header.blocksize,
            });
        }
        if !header.memcpyed() {
            header.codec()?;
        }
        Ok(header)
    }

    /// Whether the decoded bytes are stored as they are after the header.
    pub(crate) fn memcpyed(&self) -> bool {
        self.flags & FLAG_MEMCPYED != 0
    }

    /// The compressor of the streams.
    pub(crate) fn codec(&self) -> Result<BloscCodec, BloscHeaderError> {
        let code = self.flags >> 5;
        let codec = match code {
            0 => BloscCodec::BloscLz,
            1 => BloscCodec::Lz4,
            2 => BloscCodec::Snappy,
            3 => BloscCodec::Zlib,
            4 => BloscCodec::Zstd,
            _ => {
                return Err(BloscHeaderError::Compressor {
                    code,
                    version: self.compressor_version,
                })
            }
        };
        if self.compressor_version != 1 {
            return Err(BloscHeaderError::Compressor {
                code,
                version: self.compressor_version,
            });
        }
        Ok(codec)
    }

    /// The shuffle to undo on a block of `block_len` bytes.
    pub(crate) fn shuffle(&self, block_len: usize) -> Shuffle {
        let typesize = usize::from(self.typesize);
        if self.flags & FLAG_SHUFFLE != 0 && typesize > 1 {
            Shuffle::Byte
        } else if self.flags & FLAG_BITSHUFFLE != 0 && block_len >= typesize && (block_len / typesize).is_multiple_of(8)
        {
            Shuffle::Bit
        } else {
            Shuffle::None
        }
    }

    /// Number of blocks.
    pub(crate) fn nblocks(&self) -> usize {
        (self.nbytes as usize).div_ceil(self.blocksize as usize)
    }
}

/// Parses `chunk` into its decode items and unshuffles (see the [module documentation](self)).
pub(crate) fn parse(chunk: &[u8]) -> Result<BloscLayout, BloscHeaderError> {
    let header = BloscHeader::parse(chunk)?;
    let nbytes = header.nbytes as usize;
    let cbytes = header.cbytes as usize;
    let mut layout = BloscLayout {
        header,
        items: Vec::new(),
        unshuffles: Vec::new(),
    };
    if nbytes == 0 {
        return Ok(layout);
    }
    if header.memcpyed() {
        if cbytes != nbytes + HEADER_LEN {
            return Err(BloscHeaderError::CompressedSize {
                declared: header.cbytes,
                reason: format!("a memcpyed chunk of {nbytes} bytes has {}", nbytes + HEADER_LEN),
            });
        }
        layout.items.push(BloscItem {
            src: HEADER_LEN..cbytes,
            dst: 0..nbytes,
            codec: None,
        });
        return Ok(layout);
    }
    let codec = header.codec()?;
    let (blocksize, typesize) = (header.blocksize as usize, usize::from(header.typesize));
    let nblocks = header.nblocks();
    let table_end = nblocks
        .checked_mul(4)
        .map(|t| t + HEADER_LEN)
        .filter(|&end| end <= cbytes)
        .ok_or_else(|| BloscHeaderError::CompressedSize {
            declared: header.cbytes,
            reason: format!("too small for the offsets of {nblocks} blocks"),
        })?;
    for block in 0..nblocks {
        let out_start = block * blocksize;
        let block_len = blocksize.min(nbytes - out_start);
        let short = block_len < blocksize;
        let split = header.flags & FLAG_DONT_SPLIT == 0
            && typesize <= MAX_SPLITS
            && blocksize / typesize >= MIN_SPLIT_ELEMENTS
            && !short;
        let nsplits = if split { typesize } else { 1 };
        let out_of_bounds = |reason: String| BloscHeaderError::Block { block, reason };
        if block_len % nsplits != 0 {
            return Err(out_of_bounds(format!(
                "{block_len} bytes do not split into {nsplits} streams"
            )));
        }
        let stream_len = block_len / nsplits;
        let mut at = u32_at(chunk, HEADER_LEN + 4 * block) as usize;
        if at < table_end {
            return Err(out_of_bounds(format!(
                "starts at {at}, inside the header and offsets (which end at {table_end})"
            )));
        }
        for stream in 0..nsplits {
            let size = chunk
                .get(at..at + 4)
                .filter(|_| at + 4 <= cbytes)
                .map(|b| u32::from_le_bytes(b.try_into().expect("four bytes")) as usize)
                .ok_or_else(|| {
                    out_of_bounds(format!(
                        "the size of stream {stream} at {at} is past the end ({cbytes})"
                    ))
                })?;
            let src = at + 4..at + 4 + size;
            if size > i32::MAX as usize || src.end > cbytes {
                return Err(out_of_bounds(format!(
                    "stream {stream} of {size} bytes at {} is past the end ({cbytes})",
                    at + 4
                )));
            }
            let dst_start = out_start + stream * stream_len;
            layout.items.push(BloscItem {
                codec: (size != stream_len).then_some(codec),
                src: src.clone(),
                dst: dst_start..dst_start + stream_len,
            });
            at = src.end;
        }
        let shuffle = header.shuffle(block_len);
        if shuffle != Shuffle::None {
            layout.unshuffles.push(Unshuffle {
                block: out_start..out_start + block_len,
                shuffle,
                typesize,
            });
        }
    }
    Ok(layout)
}
