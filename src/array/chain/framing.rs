//! The framing of a stored chunk around its compressed stream, as the
//! chains the reader batches store it ([`crate::array::chain`]):
//!
//! | part | bytes | chains |
//! |---|---|---|
//! | zlib header (CMF, FLG: deflate, no preset dictionary) | 2 | v2 `zlib`, v3 `numcodecs.zlib` |
//! | the compressed stream | all but the rest | every chain |
//! | Adler-32 of the decoded bytes, big endian | 4 | zlib |
//! | CRC-32C (Castagnoli) of all the above, little endian | 4 | a trailing v3 `crc32c` |
//!
//! [`Framing::apply`] checks the CRC-32C and the zlib header and returns the
//! stream ([`Framing::item`]: as the item a decoder of a wave takes); the Adler-32 ([`Framing::adler32_of`]) can only be checked after
//! decoding. [`Framing::frame`] writes what `apply` takes apart. Every
//! reader, writer and front end (the Python codec pipeline through
//! `decode_stored_chunks_into`) frames and unframes chunks here.

use crate::array::error::ReadError;
use crate::array::geometry::box_copy::BoxCopy;
use crate::array::wave_item::WaveItem;
use crate::format::deflate;

/// How to get the compressed stream out of one stored chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Framing {
    /// A CRC-32C (Castagnoli) of the rest follows, 4 bytes little endian.
    pub crc32c: bool,
    /// Bytes of header before the compressed stream.
    pub strip_front: usize,
    /// Bytes of trailer after the compressed stream (inside any CRC-32C).
    pub strip_back: usize,
    /// The trailer is the Adler-32 (big endian) of the decoded data (zlib).
    pub adler32: bool,
}

impl Framing {
    /// The compressed stream inside `chunk`, after verifying any CRC-32C.
    pub(crate) fn apply<'a>(&self, chunk: &'a [u8]) -> Result<&'a [u8], String> {
        let mut body = chunk;
        if self.crc32c {
            let (rest, tail) = body
                .split_last_chunk::<4>()
                .ok_or_else(|| format!("{} bytes is shorter than the 4-byte crc32c checksum", chunk.len()))?;
            let (stored, computed) = (u32::from_le_bytes(*tail), crc32c::crc32c(rest));
            if stored != computed {
                return Err(format!(
                    "crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}"
                ));
            }
            body = rest;
        }
        let framing = self.strip_front + self.strip_back;
        if body.len() < framing {
            return Err(format!(
                "{} bytes is shorter than the {framing} bytes of stream framing",
                body.len()
            ));
        }
        if self.adler32 {
            deflate::check_zlib_header(body)?;
        }
        Ok(&body[self.strip_front..body.len() - self.strip_back])
    }

    /// The wave item of the stored chunk `stored` (`None`: missing), named
    /// `key`, that decodes to `decoded_len` bytes placed at `place`: its
    /// compressed stream, checksums verified, and any Adler-32 its decoded
    /// bytes must have. A framing that does not fit is
    /// [`ReadError::Corrupt`] naming the chunk.
    pub(crate) fn item<'a>(
        &self,
        key: &'a str,
        stored: Option<&'a [u8]>,
        decoded_len: usize,
        place: &'a BoxCopy,
    ) -> Result<WaveItem<'a>, ReadError> {
        let stream = stored
            .map(|bytes| {
                self.apply(bytes).map_err(|reason| ReadError::Corrupt {
                    key: key.to_string(),
                    reason,
                })
            })
            .transpose()?;
        Ok(WaveItem {
            key,
            stream,
            decoded_len,
            place,
            adler32: stored.and_then(|bytes| self.adler32_of(bytes)),
        })
    }

    /// The chunk to store of the compressed stream `payload` of `decoded`
    /// (read only for zlib's Adler-32): what [`Self::apply`] takes apart.
    pub(crate) fn frame(&self, payload: &[u8], decoded: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload.len() + self.strip_front + self.strip_back + 4);
        if self.adler32 {
            out.extend_from_slice(&deflate::ZLIB_HEADER);
        }
        out.extend_from_slice(payload);
        if self.adler32 {
            out.extend_from_slice(&simd_adler32::adler32(&decoded).to_be_bytes());
        }
        if self.crc32c {
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        out
    }

    /// The Adler-32 trailer `chunk` declares, where the framing has one.
    pub(crate) fn adler32_of(&self, chunk: &[u8]) -> Option<u32> {
        if !self.adler32 {
            return None;
        }
        let body = if self.crc32c {
            chunk.get(..chunk.len().checked_sub(4)?)?
        } else {
            chunk
        };
        deflate::zlib_adler32(body)
    }
}

/// The framing of zlib streams whose raw DEFLATE stream is decoded in batches.
pub(crate) const ZLIB: Framing = Framing {
    crc32c: false,
    strip_front: deflate::ZLIB_HEADER_LEN,
    strip_back: deflate::ZLIB_TRAILER_LEN,
    adler32: true,
};
