//! One buffer of a wave, as every decoder of a wave takes it (the reader's
//! host and device decoders, and the codecs' GPU plans): a compressed
//! stream, the size it decodes to and its place in the output, and the
//! mapping of a batch's errors onto the items' keys.

use crate::array::error::ReadError;
use crate::array::geometry::box_copy::BoxCopy;
use crate::error::Error;

/// One buffer of a wave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaveItem<'a> {
    /// Names the item in errors: the chunk's store key.
    pub key: &'a str,
    /// The compressed stream, its framing removed and checksums verified: a
    /// byte range of the fetched object. `None` where the object is missing:
    /// the item's place then holds the fill value.
    pub stream: Option<&'a [u8]>,
    /// The bytes the stream must decode to; any other size is
    /// [`ReadError::ChunkSize`].
    pub decoded_len: usize,
    /// Where the decoded bytes go in the output.
    pub place: &'a BoxCopy,
    /// The Adler-32 the decoded bytes must have (a zlib trailer), checked
    /// by either decoder after decoding.
    pub adler32: Option<u32>,
}

impl WaveItem<'_> {
    /// Whether the decoded bytes are, whole, one run of the output: then they
    /// can be decoded in place.
    pub(crate) fn is_whole_run(&self) -> bool {
        self.is_whole_run_of(self.decoded_len)
    }

    /// Whether `len` bytes placed from the item (its decoded bytes widened,
    /// where a filter widens them) are, whole, one run of the output.
    pub(crate) fn is_whole_run_of(&self, len: usize) -> bool {
        self.place.outer.is_empty() && self.place.src_offset == 0 && self.place.width == len
    }
}

/// Whether filling with `fill` (one element) leaves a zeroed output as it
/// is (lent memory need not be zeroed). An empty fill value (an element of no bytes) writes nothing either.
pub(crate) fn fill_is_zero(fill: &[u8]) -> bool {
    fill.iter().all(|b| *b == 0)
}

/// Maps a codec or engine error about buffer `index` of a batch to the
/// read's error naming the item's key (`key_of(index)`).
pub(crate) fn item_error(err: Error, key_of: impl Fn(usize) -> String) -> ReadError {
    match err {
        Error::OutputSize {
            index,
            expected,
            actual,
        } => ReadError::ChunkSize {
            key: key_of(index),
            expected,
            actual,
        },
        Error::Corrupt { index, reason } => ReadError::Corrupt {
            key: key_of(index),
            reason,
        },
        Error::DecodedSizeTooLarge { index, size, limit } => ReadError::ChunkTooLarge {
            key: key_of(index),
            size,
            limit,
        },
        other => ReadError::Engine(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_errors_name_the_item() {
        let keys = ["c/0", "c/1"];
        let key_of = |i: usize| keys[i].to_string();
        match item_error(
            Error::OutputSize {
                index: 1,
                expected: 8,
                actual: 10,
            },
            key_of,
        ) {
            ReadError::ChunkSize { key, expected, actual } => {
                assert_eq!((key.as_str(), expected, actual), ("c/1", 8, 10));
            }
            other => panic!("{other:?}"),
        }
        let corrupt = Error::Corrupt {
            index: 0,
            reason: "bad".into(),
        };
        assert!(matches!(item_error(corrupt, key_of), ReadError::Corrupt { key, .. } if key == "c/0"));
        let other = Error::BatchLength { inputs: 1, outputs: 2 };
        assert!(matches!(
            item_error(other, key_of),
            ReadError::Engine(Error::BatchLength { .. })
        ));
    }

    #[test]
    fn only_non_zero_fill_values_need_writing() {
        assert!(fill_is_zero(&[0, 0, 0, 0]));
        assert!(fill_is_zero(&[]));
        assert!(!fill_is_zero(&[0, 0, 0x80, 0]));
    }
}
