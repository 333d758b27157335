//! Framing of the encoded buffers: what each bitstream format declares about
//! itself in its first and last bytes, read and written in one place for the
//! CPU backend ([`crate::cpu`]), the CUDA backend (which reads the framing on
//! the host to split a batch into nvCOMP chunks) and the reader's codec chains.
//!
//! | module | format | framing read or written |
//! |---|---|---|
//! | [`lz4`] | numcodecs `LZ4` | u32 LE decoded length, then one LZ4 block |
//! | [`snappy`] | raw Snappy | varint decoded length; the tags walked without decoding |
//! | [`zstd`] | Zstandard frames | frame and block headers, skippable frames |
//! | [`zstd_literals`] | Zstandard literals | the literals section of compressed blocks: Huffman tree and streams, checked |
//! | [`zstd_sequences`] | Zstandard sequences | the sequences section of compressed blocks: tables and sequences, checked |
//! | [`fse`] | FSE tables | table descriptions and backward bit streams, for Zstandard's weights and sequences |
//! | [`deflate`] | raw DEFLATE, zlib | none for raw DEFLATE; zlib's 2-byte header and Adler-32 trailer |
//! | [`gzip`] | gzip member | RFC 1952 header, CRC-32 and ISIZE trailer |
//! | [`gdeflate`] | zarrs `gdeflate` | u64 LE decoded length, page count and page sizes, then the pages |
//! | [`ans`] | nvCOMP ANS | u32 LE decoded length leading each chunk |
//! | [`crate::blosc::format`] | Blosc 1 chunk | 16-byte header, block offsets, split streams: the items a batched decoder takes |
//! | [`filters`] | decoded chunks | the byte swap and `delta` running sum undone on each decoded chunk (not framing: shared by both backends) |
//! | [`scale_offset`] | decoded chunks | numcodecs `fixedscaleoffset`'s integers widened to floats (not framing: shared by both backends) |
//! | [`checksum`] | decoded bytes | the CRC-32, XXH64 and Adler-32 formats store of them, and the wording of a mismatch |
//! | [`shard_index`] | zarr `sharding_indexed` | the (offset, nbytes) index at the start or end of a shard, with its CRC-32C |
//!
//! nvCOMP's cascaded and bitcomp streams carry their own headers, which only
//! nvCOMP reads (through its size query): nothing of them is parsed here.
//!
//! Rules every parser follows:
//!
//! * only what the format declares is read, and every length is checked
//!   against the buffer before slicing, so a truncated or foreign buffer gives
//!   an error (a `String` saying what is wrong, which the backends wrap with
//!   the buffer's index) instead of an out-of-bounds access;
//! * nothing is allocated from a declared size: callers check declared sizes
//!   against their limits first;
//! * parsers that the CUDA backend uses on device buffers take [`BufferEnds`],
//!   the first and last bytes of a buffer, and say how many leading bytes they
//!   need when the head is too short.

pub(crate) mod ans;
pub(crate) mod checksum;
pub(crate) mod deflate;
pub(crate) mod filters;
mod fse;
pub(crate) mod gdeflate;
pub(crate) mod gzip;
pub(crate) mod lz4;
pub(crate) mod scale_offset;
#[cfg(feature = "array")]
pub(crate) mod shard_index;
pub(crate) mod snappy;
pub(crate) mod zstd;
mod zstd_literals;
mod zstd_sequences;

/// The first and last bytes of an encoded buffer: enough to read its framing
/// without the whole buffer on the host (the CUDA backend copies only these
/// from device inputs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BufferEnds<'a> {
    /// The buffer's first bytes (all of it for host inputs).
    pub(crate) head: &'a [u8],
    /// The buffer's last `min(len, gzip::TRAILER_LEN)` bytes, the longest
    /// trailer a format declares sizes in.
    pub(crate) tail: &'a [u8],
    /// The buffer's length.
    pub(crate) len: usize,
}

impl<'a> BufferEnds<'a> {
    /// The ends of a buffer held whole on the host.
    pub(crate) fn of(buf: &'a [u8]) -> Self {
        Self {
            head: buf,
            tail: &buf[buf.len().saturating_sub(gzip::TRAILER_LEN)..],
            len: buf.len(),
        }
    }

    /// Whether the head is the whole buffer.
    pub(crate) fn is_whole(&self) -> bool {
        self.head.len() == self.len
    }
}

/// Reads the little-endian `u32` at `at`, `None` past the end of `bytes`.
fn u32_le(bytes: &[u8], at: usize) -> Option<u32> {
    let word = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(word.try_into().expect("4 bytes")))
}

/// Reads the little-endian `u64` at `at`, `None` past the end of `bytes`.
fn u64_le(bytes: &[u8], at: usize) -> Option<u64> {
    let word = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(word.try_into().expect("8 bytes")))
}

/// The GPU fuzz corpus, read as the integration tests read it.
#[cfg(test)]
#[path = "../../tests/common/corpus.rs"]
mod corpus;
#[cfg(test)]
pub(crate) use corpus::gpu_corpus;
