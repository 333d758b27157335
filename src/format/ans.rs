//! nvCOMP's ANS chunks.
//!
//! ```text
//! offset  bytes  field
//! 0       4      decoded length, u32 little endian
//! 4       ...    nvCOMP's ANS stream (undocumented)
//! ```
//!
//! The leading word is what nvCOMP 6.0 writes, not a documented layout: the
//! CUDA backend uses it because nvCOMP's size query is slow for many small
//! chunks, and falls back to the query when a decode with it fails.

/// Bytes of the decoded-length word.
pub(crate) const HEADER_LEN: usize = 4;

/// The decoded length the leading word declares, `None` when `head` is
/// shorter than the word.
pub(crate) fn declared_len(head: &[u8]) -> Option<u32> {
    super::u32_le(head, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leading_word_is_the_size() {
        assert_eq!(declared_len(&[0x10, 0x27, 0, 0, 0xff]), Some(10_000));
        assert_eq!(declared_len(&[1, 2, 3]), None);
    }
}
