//! The CPU backend: the same bitstreams as nvCOMP, written and read with CPU
//! libraries, in parallel over the buffers of a batch (rayon).
//!
//! Each format's encoder and decoder lives in its own module ([`lz4`],
//! [`snappy`], [`zstd`], [`deflate`] for raw deflate and gzip, [`gdeflate`]),
//! reading and writing its framing through [`crate::format`]; `codec` maps an
//! [`Algorithm`] onto them and `growing` decodes streams that declare no size.
//! Whole blosc chunks are decoded with c-blosc by [`crate::blosc`], the codec's own module.
//! This module spreads a batch over threads and owns the policy shared by
//! every format:
//!
//! * a buffer's decoded size is found before anything is allocated for it: from
//!   what the format declares (LZ4 header, Snappy preamble, Zstandard content
//!   size, gdeflate header), checked against `max_decoded_size`
//!   ([`Error::DecodedSizeTooLarge`]) and against the most the format can
//!   expand that many encoded bytes to ([`Error::Corrupt`]), so a lying header
//!   can neither exceed the limit nor make a batch of tiny buffers allocate
//!   terabytes;
//! * formats that declare no size (bare LZ4 blocks, raw deflate, bare GDeflate
//!   streams, streamed Zstandard frames, and gzip, whose ISIZE is only the
//!   last member's length modulo 4 GiB) are decoded into growing buffers,
//!   bounded the same way;
//! * errors name the lowest failing index of the batch, whatever order the
//!   threads finished in.

pub(crate) mod deflate;
pub(crate) mod gdeflate;
pub(crate) mod lz4;
pub(crate) mod snappy;
pub(crate) mod zstd;

mod codec;
mod growing;

use rayon::prelude::*;

use codec::Codec;
use growing::decode_growing;
pub(crate) use growing::GrowError;
pub(crate) use growing::{grow, SCRATCH_KEEP_BYTES};

use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::pool::collect_in_order;

/// Result of decoding into a buffer of fixed capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// The stream decoded completely to this many bytes at the start of the buffer.
    Done(usize),
    /// The buffer is too small for the stream.
    NeedsMore,
}

/// What a format module reports when a buffer cannot be decoded.
pub(crate) type DecodeResult<T> = std::result::Result<T, String>;

/// Compresses every buffer of `inputs`.
pub(crate) fn encode_batch(algorithm: &Algorithm, inputs: &[&[u8]]) -> Result<Batch> {
    let codec = Codec::of(algorithm)?;
    let encoded = collect_in_order(inputs.par_iter().enumerate().map(|(i, input)| codec.encode(input, i)))?;
    Ok(Batch::from_buffers(&encoded))
}

/// Compresses one buffer (`index` names it in errors).
pub(crate) fn encode_one(algorithm: &Algorithm, input: &[u8], index: usize) -> Result<Vec<u8>> {
    Codec::of(algorithm)?.encode(input, index)
}

/// Reads and checks the decoded size buffer `index` declares: `None` when the
/// format declares none.
fn checked_declared_len(codec: Codec, input: &[u8], index: usize, limit: u64) -> Result<Option<usize>> {
    let corrupt = |reason: String| Error::Corrupt { index, reason };
    let Some(size) = codec.declared_len(input).map_err(corrupt)? else {
        return Ok(None);
    };
    if size > limit {
        return Err(Error::DecodedSizeTooLarge { index, size, limit });
    }
    let most = codec.max_expansion(input.len());
    if size > most {
        return Err(corrupt(format!(
            "declares {size} decoded bytes, but {} encoded bytes of {} decode to at most {most}",
            input.len(),
            codec.name()
        )));
    }
    usize::try_from(size)
        .map(Some)
        .map_err(|_| corrupt(format!("{size} bytes does not fit this machine")))
}

/// Decodes a buffer of declared size into `out`, which has exactly that size.
fn decode_exact(codec: Codec, input: &[u8], out: &mut [u8], index: usize) -> Result<()> {
    match codec.decode_to(input, out) {
        Ok(Fill::Done(n)) if n == out.len() => Ok(()),
        Ok(Fill::Done(n)) => Err(Error::Corrupt {
            index,
            reason: format!("decoded to {n} bytes, but the buffer declares {}", out.len()),
        }),
        Ok(Fill::NeedsMore) => Err(Error::Corrupt {
            index,
            reason: format!("decodes to more than the {} bytes the buffer declares", out.len()),
        }),
        Err(reason) => Err(Error::Corrupt { index, reason }),
    }
}

/// Checks that the piece `input` of buffer `index` decodes to no bytes at
/// all; `false` where the CPU has no decoder for `algorithm` (nothing to
/// compare the GPU's reading with). A piece whose framing declares an empty
/// output is never given to nvCOMP, so its body is verified here: else a
/// zeroed gzip trailer (size 0, CRC-32 0) would hide any body.
pub(crate) fn check_decodes_to_nothing(algorithm: &Algorithm, input: &[u8], index: usize) -> Result<bool> {
    match Codec::of(algorithm) {
        Ok(codec) => decode_exact(codec, input, &mut [], index).map(|()| true),
        Err(_) => Ok(false),
    }
}

/// Decompresses every buffer of `inputs`; declared sizes above `max_decoded_size` are errors.
pub(crate) fn decode_batch(algorithm: &Algorithm, inputs: &[&[u8]], max_decoded_size: u64) -> Result<Batch> {
    decode_batch_in(algorithm, inputs, max_decoded_size, |_| Vec::new())
}

/// [`decode_batch`] into the allocation `storage(total decoded bytes)`
/// returns, when its capacity suffices: a previous batch's bytes
/// ([`Batch::into_parts`]), whose pages are already mapped, are reused
/// without being zeroed, since every byte is overwritten by a successful decode.
pub(crate) fn decode_batch_in(
    algorithm: &Algorithm,
    inputs: &[&[u8]],
    max_decoded_size: u64,
    storage: impl FnOnce(usize) -> Vec<u8>,
) -> Result<Batch> {
    let codec = Codec::of(algorithm)?;
    let declared = collect_in_order(
        inputs
            .par_iter()
            .enumerate()
            .map(|(i, input)| checked_declared_len(codec, input, i, max_decoded_size)),
    )?;
    // Buffers without a declared size are decoded first, into their own vectors.
    let mut grown: Vec<Option<Vec<u8>>> = collect_in_order(inputs.par_iter().zip(&declared).enumerate().map(
        |(i, (input, size))| match size {
            Some(_) => Ok(None),
            None => decode_growing(codec, input, i, max_decoded_size).map(Some),
        },
    ))?;
    if let [Some(vec)] = grown.as_mut_slice() {
        // One buffer, decoded already: it is the batch, not copied into one.
        let vec = std::mem::take(vec);
        let len = vec.len();
        return Ok(Batch::from_parts(vec, vec![0, len]));
    }
    let sizes = declared
        .iter()
        .zip(&grown)
        .map(|(size, vec)| size.unwrap_or_else(|| vec.as_ref().map_or(0, Vec::len)));
    // One allocation for the whole batch: the caller's, or `vec![0; n]`, which
    // is calloc, so the pages are zeroed lazily by the kernel as the decoders
    // touch them, in parallel.
    let sizes: Vec<usize> = sizes.collect();
    let (mut batch, reused) = Batch::in_storage(sizes.iter().copied(), storage(sizes.iter().sum()));
    if !reused {
        crate::host_memory::advise_huge_pages(batch.data_mut());
    }
    collect_in_order(
        batch
            .buffers_mut()
            .into_par_iter()
            .zip(inputs.par_iter())
            .zip(grown.par_iter_mut())
            .enumerate()
            .map(|(i, ((out, input), grown))| match grown.take() {
                Some(vec) => {
                    out.copy_from_slice(&vec);
                    Ok(())
                }
                None => decode_exact(codec, input, out, i),
            }),
    )?;
    Ok(batch)
}

/// Decompresses `inputs[i]` into `outputs[i]`, which must be exactly the decoded size.
pub(crate) fn decode_batch_into(
    algorithm: &Algorithm,
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    max_decoded_size: u64,
) -> Result<()> {
    crate::batch::check_batch_length(inputs.len(), outputs.len())?;
    let codec = Codec::of(algorithm)?;
    // Every declared size is checked against its output before any decoding,
    // so a wrong-size output leaves all outputs untouched.
    let declared = collect_in_order(
        inputs
            .par_iter()
            .zip(outputs.par_iter())
            .enumerate()
            .map(|(i, (input, out))| {
                let size = checked_declared_len(codec, input, i, max_decoded_size)?;
                match size {
                    Some(declared) if declared != out.len() => Err(Error::OutputSize {
                        index: i,
                        expected: out.len(),
                        actual: declared,
                    }),
                    _ => Ok(size),
                }
            }),
    )?;
    collect_in_order(
        outputs
            .par_iter_mut()
            .zip(inputs.par_iter())
            .zip(declared.par_iter())
            .enumerate()
            .map(|(i, ((out, input), size))| match size {
                Some(_) => decode_exact(codec, input, out, i),
                None => decode_unsized_into(codec, input, out, i, max_decoded_size),
            }),
    )
    .map(drop)
}

/// Decodes a buffer without declared size straight into the caller's output;
/// only when it does not fit exactly is it decoded again to learn its size.
fn decode_unsized_into(codec: Codec, input: &[u8], out: &mut [u8], index: usize, limit: u64) -> Result<()> {
    let fits = if out.len() as u64 <= limit {
        codec
            .decode_to(input, out)
            .map_err(|reason| Error::Corrupt { index, reason })?
    } else {
        Fill::NeedsMore
    };
    let decoded = match fits {
        Fill::Done(n) if n == out.len() => return Ok(()),
        Fill::Done(n) => n,
        Fill::NeedsMore => {
            if let Some(len) = growing::decoded_len(codec, input, index, limit) {
                let len = usize::try_from(len?).unwrap_or(usize::MAX);
                return Err(Error::OutputSize {
                    index,
                    expected: out.len(),
                    actual: len,
                });
            }
            let vec = decode_growing(codec, input, index, limit)?;
            if vec.len() == out.len() {
                out.copy_from_slice(&vec);
                return Ok(());
            }
            vec.len()
        }
    };
    Err(Error::OutputSize {
        index,
        expected: out.len(),
        actual: decoded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_storage_is_overwritten() {
        let alg: Algorithm = "lz4".parse().unwrap();
        let data: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 5000 + usize::from(i)]).collect();
        let encoded = encode_batch(&alg, &data.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap();
        let inputs: Vec<&[u8]> = encoded.iter().collect();
        for storage in [vec![0xAA; 20_000], vec![0xAA; 100], Vec::with_capacity(16_000)] {
            let batch = decode_batch_in(&alg, &inputs, 1 << 20, |total| {
                assert_eq!(total, 15_003);
                storage
            })
            .unwrap();
            assert_eq!(batch.to_vecs(), data);
        }
    }

    #[test]
    fn errors_name_the_lowest_failing_index() {
        let alg = Algorithm::Snappy;
        let good = encode_one(&alg, b"fine", 0).unwrap();
        let inputs: Vec<&[u8]> = vec![&good, b"\xff\xff\xff\xff\xff\xff", &good, b"\xff"];
        match decode_batch(&alg, &inputs, 1 << 20) {
            Err(Error::Corrupt { index: 1, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
