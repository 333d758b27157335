//! The checksums formats store of a buffer's decoded bytes, and the one
//! wording of a mismatch, which both backends give: the host over the bytes
//! it inflated, the device over the buffers nvCOMP decoded (where this
//! crate sums them, since nvCOMP does not check them).

/// A checksum that a format stores of a buffer's decoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentCheck {
    /// gzip's CRC-32.
    GzipCrc32(u32),
    /// A Zstandard frame's content checksum: the low 32 bits of XXH64.
    ZstdXxh64(u32),
    /// zlib's Adler-32.
    ZlibAdler32(u32),
}

impl ContentCheck {
    /// The stored value.
    pub(crate) fn stored(self) -> u32 {
        match self {
            Self::GzipCrc32(v) | Self::ZstdXxh64(v) | Self::ZlibAdler32(v) => v,
        }
    }

    /// Why decoded bytes whose checksum is `actual` are refused.
    pub(crate) fn mismatch_reason(self, actual: u32) -> String {
        let what = match self {
            Self::GzipCrc32(_) => "gzip CRC-32",
            Self::ZstdXxh64(_) => "Zstandard content checksum",
            Self::ZlibAdler32(_) => "zlib Adler-32",
        };
        format!(
            "{what} mismatch: stored {:#010x}, decoded data has {actual:#010x}",
            self.stored()
        )
    }
}
