//! The CPU backend: the same bitstreams as nvCOMP, written and read with CPU
//! libraries, in parallel over the buffers of a batch (rayon).
//!
//! Each format lives in its own module ([`lz4`], [`snappy`], [`zstd`],
//! [`deflate`] for raw deflate and gzip, [`gdeflate`]); this module maps an
//! [`Algorithm`] onto them, spreads a batch over threads, and owns the policy
//! shared by every format:
//!
//! * a buffer's decoded size is found before anything is allocated for it: from
//!   what the format declares (LZ4 header, Snappy preamble, Zstandard content
//!   size, gzip ISIZE, gdeflate header), checked against `max_decoded_size`
//!   ([`Error::DecodedSizeTooLarge`]) and against the most the format can
//!   expand that many encoded bytes to ([`Error::Corrupt`]), so a lying header
//!   can neither exceed the limit nor make a batch of tiny buffers allocate
//!   terabytes;
//! * formats that declare no size (bare LZ4 blocks, raw deflate, bare GDeflate
//!   streams, streamed Zstandard frames) are decoded into growing buffers,
//!   bounded the same way;
//! * errors name the lowest failing index of the batch, whatever order the
//!   threads finished in.

pub mod deflate;
pub mod gdeflate;
pub mod lz4;
pub mod snappy;
pub mod zstd;

use rayon::prelude::*;

use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::error::{Error, Result};

/// Result of decoding into a buffer of fixed capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// The stream decoded completely to this many bytes at the start of the buffer.
    Done(usize),
    /// The buffer is too small for the stream.
    NeedsMore,
}

/// What a format module reports when a buffer cannot be decoded.
pub type DecodeResult<T> = std::result::Result<T, String>;

/// The CPU view of an algorithm: only the options that change the bitstream
/// or the CPU encoder (LZ4's `data_type` is a GPU tuning hint and is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Lz4 { header: bool },
    Snappy,
    Zstd,
    Deflate { level: i32 },
    Gzip { level: i32 },
    Gdeflate { level: i32, header: bool },
}

impl Codec {
    fn of(algorithm: &Algorithm) -> Result<Self> {
        Ok(match *algorithm {
            Algorithm::Lz4 { has_header, .. } => Self::Lz4 { header: has_header },
            Algorithm::Snappy => Self::Snappy,
            Algorithm::Zstd => Self::Zstd,
            Algorithm::Deflate { algorithm } => Self::Deflate {
                level: deflate_level(algorithm),
            },
            Algorithm::Gzip { algorithm } => Self::Gzip {
                level: deflate_level(algorithm),
            },
            Algorithm::Gdeflate { algorithm, has_header } => Self::Gdeflate {
                level: deflate_level(algorithm),
                header: has_header,
            },
            Algorithm::Cascaded { .. } | Algorithm::Bitcomp { .. } | Algorithm::Ans { .. } => {
                return Err(Error::NeedsGpu {
                    algorithm: algorithm.name(),
                })
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Lz4 { .. } => "lz4",
            Self::Snappy => "snappy",
            Self::Zstd => "zstd",
            Self::Deflate { .. } => "deflate",
            Self::Gzip { .. } => "gzip",
            Self::Gdeflate { .. } => "gdeflate",
        }
    }

    /// The decoded size the buffer declares, `None` when the format has none.
    fn declared_len(self, input: &[u8]) -> DecodeResult<Option<u64>> {
        match self {
            Self::Lz4 { header: true } => lz4::declared_len(input).map(Some),
            Self::Snappy => snappy::declared_len(input).map(Some),
            Self::Zstd => zstd::declared_len(input),
            Self::Gzip { .. } => Ok(Some(deflate::gzip_declared_len(input)?)),
            Self::Gdeflate { header: true, .. } => gdeflate::declared_len(input).map(Some),
            Self::Lz4 { header: false } | Self::Deflate { .. } | Self::Gdeflate { header: false, .. } => Ok(None),
        }
    }

    /// The most `encoded_len` bytes of the format can decode to. Declared
    /// sizes above it are lies, and growing buffers stop there.
    fn max_expansion(self, encoded_len: usize) -> u64 {
        let n = encoded_len as u64;
        match self {
            Self::Lz4 { .. } => lz4::max_decoded_len(n),
            Self::Snappy => snappy::max_decoded_len(n),
            Self::Zstd => zstd::max_decoded_len(n),
            Self::Deflate { .. } | Self::Gzip { .. } => deflate::max_decoded_len(n),
            Self::Gdeflate { header: true, .. } => gdeflate::max_decoded_len(n),
            // nvCOMP's batched GDeflate compresses chunks of at most 64 KiB.
            Self::Gdeflate { header: false, .. } => gdeflate::MAX_BARE_DECODED_LEN,
        }
    }

    /// Decodes into `out`. Formats with a declared size are given exactly that
    /// size; the others any capacity, and report [`Fill::NeedsMore`] when short.
    fn decode_to(self, input: &[u8], out: &mut [u8]) -> DecodeResult<Fill> {
        match self {
            Self::Lz4 { header } => lz4::decode_to(input, out, header),
            Self::Snappy => snappy::decode_to(input, out),
            Self::Zstd => zstd::decode_to(input, out),
            Self::Deflate { .. } => deflate::deflate_decode_to(input, out),
            Self::Gzip { .. } => deflate::gzip_decode_to(input, out),
            Self::Gdeflate { header: true, .. } => gdeflate::decode_paged_to(input, out),
            Self::Gdeflate { header: false, .. } => gdeflate::decode_bare_to(input, out),
        }
    }

    fn encode(self, input: &[u8], index: usize) -> Result<Vec<u8>> {
        match self {
            Self::Lz4 { header } => lz4::encode(input, header, index),
            Self::Snappy => snappy::encode(input, index),
            Self::Zstd => zstd::encode(input, index),
            Self::Deflate { level } => deflate::deflate_encode(input, level, index),
            Self::Gzip { level } => deflate::gzip_encode(input, level, index),
            Self::Gdeflate { level, header: true } => gdeflate::encode_paged(input, level, index),
            Self::Gdeflate { level, header: false } => gdeflate::encode_bare(input, level, index),
        }
    }
}

/// Maps nvCOMP's deflate-family `algorithm` option (0 = fastest .. 5 = best
/// ratio) to a zlib-scale compression level, used for deflate, gzip and
/// GDeflate alike. nvCOMP's knob selects GPU strategies, not zlib levels, so
/// the mapping follows intent: 0 is the fastest level 1, 1 the balanced
/// default 6, and 2 to 5 zlib's best level 9 (libdeflate's GDeflate levels 10
/// to 12 are far slower for little gain).
pub fn deflate_level(algorithm: u8) -> i32 {
    match algorithm {
        0 => 1,
        1 => 6,
        _ => 9,
    }
}

/// Collects per-buffer results in index order, so the error returned is the
/// one of the lowest failing index whatever order the threads ran in.
fn in_order<T>(results: Vec<Result<T>>) -> Result<Vec<T>> {
    results.into_iter().collect()
}

/// Compresses every buffer of `inputs`.
pub fn encode_batch(algorithm: &Algorithm, inputs: &[&[u8]]) -> Result<Batch> {
    let codec = Codec::of(algorithm)?;
    let encoded = in_order(
        inputs
            .par_iter()
            .enumerate()
            .map(|(i, input)| codec.encode(input, i))
            .collect(),
    )?;
    Ok(Batch::from_buffers(&encoded))
}

/// Compresses one buffer (`index` names it in errors).
pub fn encode_one(algorithm: &Algorithm, input: &[u8], index: usize) -> Result<Vec<u8>> {
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

/// Why a stream without a declared size did not decode into a bounded,
/// growing buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrowError {
    /// The buffer reached its bound and the stream still had more to write.
    Full,
    /// The allocator refused a buffer of this many bytes.
    OutOfMemory(usize),
    /// The stream is malformed or truncated.
    Corrupt(String),
}

/// Bytes a stream without a declared size is first decoded into: a typical
/// ratio, so most streams decode in one go.
fn first_capacity(encoded_len: usize) -> usize {
    encoded_len.saturating_mul(4).max(64 * 1024)
}

/// Grows `out`'s capacity for a stream that writes into it: doubling, from
/// `first`, never past `bound`. [`GrowError::Full`] once it holds `bound`;
/// the allocation is fallible, so a refused one is an error, not an abort.
pub(crate) fn grow(out: &mut Vec<u8>, first: usize, bound: usize) -> std::result::Result<(), GrowError> {
    if out.capacity() >= bound {
        return Err(GrowError::Full);
    }
    let target = out.capacity().saturating_mul(2).max(first).min(bound);
    out.try_reserve_exact(target - out.len())
        .map_err(|_| GrowError::OutOfMemory(target))
}

/// Per-thread scratch above this many bytes is freed after use, so that one
/// large stream does not pin its memory on every decoding thread.
pub(crate) const SCRATCH_KEEP_BYTES: usize = 1 << 20;

thread_local! {
    // The buffer that formats without a streaming decoder (bare LZ4 blocks,
    // bare GDeflate streams) decode into, growing until the stream fits.
    static GROW_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Decodes `input` (a format without a streaming decoder) into the thread's
/// scratch, doubled until the stream fits, up to `bound`; returns a copy of
/// exactly the decoded bytes.
fn decode_retrying(codec: Codec, input: &[u8], bound: usize) -> std::result::Result<Vec<u8>, GrowError> {
    GROW_SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let mut cap = first_capacity(input.len()).min(bound);
        let result = loop {
            if scratch.len() < cap {
                let more = cap - scratch.len();
                if scratch.try_reserve_exact(more).is_err() {
                    break Err(GrowError::OutOfMemory(cap));
                }
                scratch.resize(cap, 0);
            }
            match codec.decode_to(input, &mut scratch[..cap]) {
                Ok(Fill::Done(n)) => break Ok(scratch[..n].to_vec()),
                Ok(Fill::NeedsMore) if cap < bound => cap = cap.saturating_mul(2).min(bound),
                Ok(Fill::NeedsMore) => break Err(GrowError::Full),
                Err(reason) => break Err(GrowError::Corrupt(reason)),
            }
        };
        if scratch.capacity() > SCRATCH_KEEP_BYTES {
            *scratch = Vec::new();
        }
        result
    })
}

/// Decodes a buffer that declares no size into a buffer that grows until
/// the stream fits, up to `limit` and to what the format can expand to:
/// Zstandard and deflate with their streaming decoders (no stream is decoded
/// twice), the others into a scratch buffer that doubles.
fn decode_growing(codec: Codec, input: &[u8], index: usize, limit: u64) -> Result<Vec<u8>> {
    let most = codec.max_expansion(input.len());
    let bound = usize::try_from(limit.min(most)).unwrap_or(usize::MAX);
    let result = match codec {
        // Stopping one byte past the bound tells a stream of exactly `bound`
        // bytes from a longer one.
        Codec::Zstd => zstd::decode_streamed(input, bound.saturating_add(1)),
        // The streaming decoder resumes where it stopped: a small start costs
        // no second decode.
        Codec::Deflate { .. } => {
            deflate::inflate_growing(input, input.len().saturating_mul(4).max(4096), bound.saturating_add(1))
        }
        _ => decode_retrying(codec, input, bound),
    };
    result.map_err(|e| match e {
        GrowError::Full if limit < most => Error::DecodedSizeTooLarge {
            // Reported as at least one byte over the limit: the real size is unknown.
            index,
            size: limit.saturating_add(1),
            limit,
        },
        GrowError::Full => Error::Corrupt {
            index,
            reason: format!(
                "decodes to more than the {most} bytes {} encoded bytes of {} can hold",
                input.len(),
                codec.name()
            ),
        },
        GrowError::OutOfMemory(size) => Error::OutOfMemory {
            index,
            size: size as u64,
        },
        GrowError::Corrupt(reason) => Error::Corrupt { index, reason },
    })
}

/// Decompresses every buffer of `inputs`; declared sizes above `max_decoded_size` are errors.
pub fn decode_batch(algorithm: &Algorithm, inputs: &[&[u8]], max_decoded_size: u64) -> Result<Batch> {
    decode_batch_in(algorithm, inputs, max_decoded_size, |_| Vec::new())
}

/// [`decode_batch`] into the allocation `storage(total decoded bytes)`
/// returns, when its capacity suffices: a previous batch's bytes
/// ([`Batch::into_parts`]), whose pages are already mapped, are reused
/// without being zeroed, since every byte is overwritten by a successful decode.
pub fn decode_batch_in(
    algorithm: &Algorithm,
    inputs: &[&[u8]],
    max_decoded_size: u64,
    storage: impl FnOnce(usize) -> Vec<u8>,
) -> Result<Batch> {
    let codec = Codec::of(algorithm)?;
    let declared = in_order(
        inputs
            .par_iter()
            .enumerate()
            .map(|(i, input)| checked_declared_len(codec, input, i, max_decoded_size))
            .collect(),
    )?;
    // Buffers without a declared size are decoded first, into their own vectors.
    let mut grown: Vec<Option<Vec<u8>>> = in_order(
        inputs
            .par_iter()
            .zip(&declared)
            .enumerate()
            .map(|(i, (input, size))| match size {
                Some(_) => Ok(None),
                None => decode_growing(codec, input, i, max_decoded_size).map(Some),
            })
            .collect(),
    )?;
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
        advise_huge_pages(batch.data_mut());
    }
    let results: Vec<Result<()>> = batch
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
        })
        .collect();
    in_order(results)?;
    Ok(batch)
}

/// Asks Linux to back a large, still untouched output with transparent huge
/// pages: faulting in fresh 4 KiB pages costs as much as decoding LZ4 into
/// them, 2 MiB pages a fraction of it. Only advice: failure changes nothing.
pub(crate) fn advise_huge_pages(data: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = (data.as_mut_ptr() as usize).next_multiple_of(HUGE);
        let end = (data.as_mut_ptr() as usize + data.len()) / HUGE * HUGE;
        if data.len() >= 4 * HUGE && end > start {
            // SAFETY: [start, end) lies within `data`, which we own; madvise
            // with MADV_HUGEPAGE does not change its contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = data;
}

/// Decompresses `inputs[i]` into `outputs[i]`, which must be exactly the decoded size.
pub fn decode_batch_into(
    algorithm: &Algorithm,
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    max_decoded_size: u64,
) -> Result<()> {
    crate::batch::check_batch_length(inputs.len(), outputs.len())?;
    let codec = Codec::of(algorithm)?;
    // Every declared size is checked against its output before any decoding,
    // so a wrong-size output leaves all outputs untouched.
    let declared = in_order(
        inputs
            .par_iter()
            .zip(outputs.par_iter())
            .enumerate()
            .map(|(i, (input, out))| {
                let size = checked_declared_len(codec, input, i, max_decoded_size)?;
                match size {
                    Some(expected) if expected != out.len() => Err(Error::OutputSize {
                        index: i,
                        expected,
                        actual: out.len(),
                    }),
                    _ => Ok(size),
                }
            })
            .collect(),
    )?;
    let results: Vec<Result<()>> = outputs
        .par_iter_mut()
        .zip(inputs.par_iter())
        .zip(declared.par_iter())
        .enumerate()
        .map(|(i, ((out, input), size))| match size {
            Some(_) => decode_exact(codec, input, out, i),
            None => decode_unsized_into(codec, input, out, i, max_decoded_size),
        })
        .collect();
    in_order(results).map(drop)
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
    let expected = match fits {
        Fill::Done(n) if n == out.len() => return Ok(()),
        Fill::Done(n) => n,
        Fill::NeedsMore => {
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
        expected,
        actual: out.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_cover_every_nvcomp_setting() {
        assert_eq!((0..=5).map(deflate_level).collect::<Vec<_>>(), [1, 6, 9, 9, 9, 9]);
    }

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
