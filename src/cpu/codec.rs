//! [`Codec`], the CPU view of an [`Algorithm`], and its dispatch onto the
//! format modules.

use super::{deflate, gdeflate, lz4, snappy, zstd, DecodeResult, Fill};
use crate::algorithm::Algorithm;
use crate::error::{Error, Result};

/// The CPU view of an algorithm: its [`Format`], and its name for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Codec {
    pub(super) format: Format,
    name: &'static str,
}

/// The options of an algorithm that change the bitstream or the CPU encoder
/// (LZ4's `data_type` is a GPU tuning hint and is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Lz4 { header: bool },
    Snappy,
    Zstd,
    Deflate { level: i32 },
    Gzip { level: i32 },
    Gdeflate { level: i32, header: bool },
}

impl Codec {
    pub(super) fn of(algorithm: &Algorithm) -> Result<Self> {
        let format = match *algorithm {
            Algorithm::Lz4 { has_header, .. } => Format::Lz4 { header: has_header },
            Algorithm::Snappy => Format::Snappy,
            Algorithm::Zstd => Format::Zstd,
            Algorithm::Deflate { algorithm } => Format::Deflate {
                level: deflate_level(algorithm),
            },
            Algorithm::Gzip { algorithm } => Format::Gzip {
                level: deflate_level(algorithm),
            },
            Algorithm::Gdeflate { algorithm, has_header } => Format::Gdeflate {
                level: deflate_level(algorithm),
                header: has_header,
            },
            Algorithm::Cascaded { .. } | Algorithm::Bitcomp { .. } | Algorithm::Ans { .. } => {
                return Err(Error::NeedsGpu {
                    algorithm: algorithm.name(),
                })
            }
        };
        Ok(Self {
            format,
            name: algorithm.name(),
        })
    }

    /// The algorithm's name.
    pub(super) fn name(self) -> &'static str {
        self.name
    }

    /// The decoded size the buffer declares, `None` when the format has none.
    pub(super) fn declared_len(self, input: &[u8]) -> DecodeResult<Option<u64>> {
        match self.format {
            Format::Lz4 { header: true } => lz4::declared_len(input).map(Some),
            Format::Snappy => snappy::declared_len(input).map(Some),
            Format::Zstd => zstd::declared_len(input),
            Format::Gdeflate { header: true, .. } => gdeflate::declared_len(input).map(Some),
            // gzip's ISIZE is the last member's length modulo 4 GiB: no size.
            Format::Gzip { .. }
            | Format::Lz4 { header: false }
            | Format::Deflate { .. }
            | Format::Gdeflate { header: false, .. } => Ok(None),
        }
    }

    /// The most `encoded_len` bytes of the format can decode to. Declared
    /// sizes above it are lies, and growing buffers stop there.
    pub(super) fn max_expansion(self, encoded_len: usize) -> u64 {
        let n = encoded_len as u64;
        match self.format {
            Format::Lz4 { .. } => lz4::max_decoded_len(n),
            Format::Snappy => snappy::max_decoded_len(n),
            Format::Zstd => zstd::max_decoded_len(n),
            Format::Deflate { .. } | Format::Gzip { .. } => deflate::max_decoded_len(n),
            Format::Gdeflate { header: true, .. } => gdeflate::max_decoded_len(n),
            // nvCOMP's batched GDeflate compresses chunks of at most 64 KiB.
            Format::Gdeflate { header: false, .. } => gdeflate::MAX_BARE_DECODED_LEN,
        }
    }

    /// Decodes into `out`. Formats with a declared size are given exactly that
    /// size; the others any capacity, and report [`Fill::NeedsMore`] when short.
    pub(super) fn decode_to(self, input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
        match self.format {
            Format::Lz4 { header } => lz4::decode_to(input, out, header),
            Format::Snappy => snappy::decode_to(input, out),
            Format::Zstd => zstd::decode_to(input, out),
            Format::Deflate { .. } => deflate::deflate_decode_to(input, out),
            Format::Gzip { .. } => deflate::gzip_decode_to(input, out),
            Format::Gdeflate { header: true, .. } => gdeflate::decode_paged_to(input, out),
            Format::Gdeflate { header: false, .. } => gdeflate::decode_bare_to(input, out),
        }
    }

    pub(super) fn encode(self, input: &[u8], index: usize) -> Result<Vec<u8>> {
        match self.format {
            Format::Lz4 { header } => lz4::encode(input, header, index),
            Format::Snappy => snappy::encode(input, index),
            Format::Zstd => zstd::encode(input, index),
            Format::Deflate { level } => deflate::deflate_encode(input, level, index),
            Format::Gzip { level } => deflate::gzip_encode(input, level, index),
            Format::Gdeflate { level, header: true } => gdeflate::encode_paged(input, level, index),
            Format::Gdeflate { level, header: false } => gdeflate::encode_bare(input, level, index),
        }
    }
}

/// Maps nvCOMP's deflate-family `algorithm` option (0 = fastest .. 5 = best
/// ratio) to a zlib-scale compression level, used for deflate, gzip and
/// GDeflate alike. nvCOMP's knob selects GPU strategies, not zlib levels, so
/// the mapping follows intent: 0 is the fastest level 1, 1 the balanced
/// default 6, and 2 to 5 zlib's best level 9 (libdeflate's GDeflate levels 10
/// to 12 are far slower for little gain).
pub(crate) fn deflate_level(algorithm: u8) -> i32 {
    match algorithm {
        0 => 1,
        1 => 6,
        _ => 9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_cover_every_nvcomp_setting() {
        assert_eq!((0..=5).map(deflate_level).collect::<Vec<_>>(), [1, 6, 9, 9, 9, 9]);
    }
}
