//! The DEFLATE walk kernel, built for the host, against zlib-rs (the CPU
//! backend's decoder, through [`deflate::check_stream`]): it must pass
//! exactly the streams zlib inflates, and say where they end as zlib does.

use super::*;
use crate::cuda::ptx::{host_build, MARGIN};
use crate::format::zstd::{samples, xorshift};

type Entry = unsafe extern "C" fn(*const u64, u64, *mut u64);

/// The host build's verdicts on `streams`, each copied [`MARGIN`] bytes
/// inside a buffer of its own, as the kernel needs.
fn kernel_verdicts(entry: &Entry, streams: &[&[u8]]) -> Vec<u64> {
    let padded: Vec<Vec<u8>> = streams
        .iter()
        .map(|s| [&[0xa5; MARGIN][..], s, &[0x5a; MARGIN]].concat())
        .collect();
    let words: Vec<u64> = padded
        .iter()
        .zip(streams)
        .flat_map(|(p, s)| [p[MARGIN..].as_ptr() as u64, s.len() as u64])
        .collect();
    let mut verdicts = vec![0u64; streams.len()];
    // SAFETY: the words name the padded streams, alive for the call.
    unsafe { entry(words.as_ptr(), streams.len() as u64, verdicts.as_mut_ptr()) };
    verdicts
}

/// zlib's verdict in the kernel's terms.
fn zlib_verdict(stream: &[u8]) -> u64 {
    deflate::check_stream(stream).map_or(REFUSED, |taken| taken as u64)
}

fn compressed(data: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
    std::io::Write::write_all(&mut enc, data).unwrap();
    enc.finish().unwrap()
}

fn with_entry(test: impl FnOnce(&Entry)) {
    let (_dir, lib) = host_build("inflate.cu");
    // SAFETY: the entry's C signature.
    let entry: libloading::Symbol<Entry> = unsafe { lib.get(b"deflate_streams") }.unwrap();
    test(&entry);
}

/// Streams of every level (stored, fixed and dynamic blocks), of several
/// kinds of data and sizes, followed by other bytes or not: the kernel
/// passes them all and says where each ends.
#[test]
fn the_kernel_passes_every_stream_zlib_writes() {
    with_entry(|entry| {
        let mut streams = Vec::new();
        for (case, len) in [0usize, 1, 300, 40_000, 300_000].into_iter().enumerate() {
            for sample in samples(len, case as u64) {
                for level in [0, 1, 6, 9] {
                    streams.push(compressed(&sample, level));
                }
                let mut miniz = miniz_oxide::deflate::compress_to_vec(&sample, 10);
                miniz.extend_from_slice(b"after the stream");
                streams.push(miniz);
            }
        }
        let views: Vec<&[u8]> = streams.iter().map(Vec::as_slice).collect();
        for (stream, verdict) in views.iter().zip(kernel_verdicts(entry, &views)) {
            let taken = zlib_verdict(stream);
            assert_ne!(taken, REFUSED);
            assert_eq!(verdict, taken, "a stream of {} bytes", stream.len());
        }
    });
}

/// Bit flips, byte edits and truncations all over valid streams: the
/// kernel's verdict is zlib's, refusal and length alike.
#[test]
fn the_kernel_refuses_exactly_what_zlib_refuses() {
    with_entry(|entry| {
        let mut next = xorshift(0xDEF1);
        let (mut mutants, mut refused) = (0usize, 0usize);
        for (case, len) in [200usize, 5_000, 70_000].into_iter().enumerate() {
            for sample in samples(len, 40 + case as u64) {
                for level in [1, 6, 9] {
                    let stream = compressed(&sample, level);
                    let bad: Vec<Vec<u8>> = (0..150)
                        .map(|m| {
                            let mut bad = stream.clone();
                            let at = (next() as usize) % bad.len();
                            match m % 5 {
                                0 => bad.truncate(at),
                                1 => bad[at] = next() as u8,
                                _ => bad[at] ^= 1 << (next() % 8),
                            }
                            bad
                        })
                        .collect();
                    let views: Vec<&[u8]> = bad.iter().map(Vec::as_slice).collect();
                    for (stream, verdict) in views.iter().zip(kernel_verdicts(entry, &views)) {
                        assert_eq!(verdict, zlib_verdict(stream), "case {case}, level {level}");
                        mutants += 1;
                        refused += usize::from(verdict == REFUSED);
                    }
                }
            }
        }
        assert!(mutants > 5000, "{mutants} mutants");
        assert!(refused > mutants / 4, "only {refused} of {mutants} mutants refused");
    });
}

/// DEFLATE bits, least significant first, as a stream is written.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    bits: u32,
}

impl BitWriter {
    fn put(&mut self, value: u32, n: u32) {
        for i in 0..n {
            if self.bits.is_multiple_of(8) {
                self.bytes.push(0);
            }
            let last = self.bytes.last_mut().unwrap();
            *last |= (((value >> i) & 1) as u8) << (self.bits % 8);
            self.bits += 1;
        }
    }

    /// A Huffman code of `len` bits, most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        for i in (0..len).rev() {
            self.put(code >> i & 1, 1);
        }
    }

    /// A symbol of the fixed literal/length code.
    fn fixed(&mut self, symbol: u32) {
        match symbol {
            0..=143 => self.code(0x30 + symbol, 8),
            144..=255 => self.code(0x190 + symbol - 144, 9),
            256..=279 => self.code(symbol - 256, 7),
            _ => self.code(0xc0 + symbol - 280, 8),
        }
    }
}

/// A last fixed block of `body`'s symbols and distances.
fn fixed_block(body: impl FnOnce(&mut BitWriter)) -> Vec<u8> {
    let mut w = BitWriter::default();
    w.put(1, 1);
    w.put(1, 2);
    body(&mut w);
    w.fixed(256);
    w.bytes
}

/// Streams made to break one of zlib's rules each, beside their valid
/// twins: the kernel refuses each broken one, as zlib does, and passes
/// each twin.
#[test]
fn the_kernel_keeps_each_of_zlibs_rules() {
    let a_match = |w: &mut BitWriter, distance_code: u32| {
        w.fixed(257); // length 3
        w.code(distance_code, 5);
    };
    let stored = |len: u16, nlen: u16| {
        let mut s = vec![1u8, 0, 0, 0, 0];
        s[1..3].copy_from_slice(&len.to_le_bytes());
        s[3..5].copy_from_slice(&nlen.to_le_bytes());
        s.extend(std::iter::repeat_n(7u8, len as usize));
        s
    };
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("literals", fixed_block(|w| (0..4).for_each(|b| w.fixed(b))), true),
        (
            "a match within the output",
            fixed_block(|w| {
                (0..4).for_each(|b| w.fixed(b));
                a_match(w, 3); // distance 4
            }),
            true,
        ),
        (
            "a match before the output's start",
            fixed_block(|w| {
                (0..3).for_each(|b| w.fixed(b));
                a_match(w, 3);
            }),
            false,
        ),
        (
            "distance code 30",
            fixed_block(|w| {
                (0..200).for_each(|b| w.fixed(b));
                a_match(w, 30);
            }),
            false,
        ),
        ("literal/length code 286", fixed_block(|w| w.fixed(286)), false),
        ("block type 3", vec![0b111, 0, 0], false),
        ("a stored block", stored(5, !5), true),
        ("stored lengths that disagree", stored(5, !6), false),
        ("an empty stored block", stored(0, 0xffff), true),
        ("a stored block cut short", stored(5, !5)[..8].to_vec(), false),
        ("no last block", vec![0b010, 0], false),
    ];
    with_entry(|entry| {
        let views: Vec<&[u8]> = cases.iter().map(|(_, s, _)| s.as_slice()).collect();
        for ((name, stream, valid), verdict) in cases.iter().zip(kernel_verdicts(entry, &views)) {
            assert_eq!(zlib_verdict(stream) != REFUSED, *valid, "{name}: zlib's verdict");
            assert_eq!(verdict, zlib_verdict(stream), "{name}");
        }
    });
}

/// The GPU fuzz corpus's raw DEFLATE cases, which nvCOMP decoded and zlib
/// refuses: the kernel refuses the mutated buffer of each and passes the
/// others.
#[test]
fn the_kernel_refuses_the_corpus_streams_nvcomp_accepted() {
    let cases = crate::format::gpu_corpus("deflate");
    assert!(!cases.is_empty(), "the corpus's raw DEFLATE cases");
    with_entry(|entry| {
        for (name, batch, _) in cases {
            let views: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
            let verdicts = kernel_verdicts(entry, &views);
            assert_eq!(verdicts[1], REFUSED, "{name}: the mutated buffer");
            for (stream, verdict) in views.iter().zip(verdicts) {
                assert_eq!(verdict, zlib_verdict(stream), "{name}");
            }
        }
    });
}

/// A refused stream's error is the CPU backend's, for the same buffer; a
/// gzip member whose stream ends before its body does says why the GPU
/// refuses it.
#[test]
fn refused_streams_are_worded_as_the_cpu_backend_words_them() {
    // A fixed block whose first symbol is a match at distance 1, which zlib
    // calls "invalid distance too far back"; after a literal, the same
    // match is valid ("aaaa").
    let (bad, good) = (&[3u8, 2, 0][..], &[0x4b, 4, 2, 0][..]);
    let whole = |buffer, bytes: &[u8], whole| DeflateStream {
        buffer,
        stream: 0..bytes.len(),
        whole,
    };
    let deflate = crate::algorithm::Algorithm::Deflate { algorithm: 0 };
    let cpu_err = crate::cpu::decode_batch(&deflate, &[good, bad, bad], 1 << 20).unwrap_err();
    let err = host_error(&whole(1, bad, false), &[good, bad, bad]).expect("refused");
    assert_eq!(err.to_string(), cpu_err.to_string());
    assert!(host_error(&whole(0, good, true), &[good]).is_none());
    let two = [good, good].concat();
    match host_error(&whole(0, &two, true), &[&two]) {
        Some(Error::Corrupt { index: 0, reason }) => assert_eq!(reason, MULTI_MEMBER_GZIP),
        other => panic!("{other:?}"),
    }
    assert!(host_error(&whole(0, &two, false), &[&two]).is_none());
    assert!(passes(&whole(0, &two, false), 4) && !passes(&whole(0, &two, true), 4));
    assert!(passes(&whole(0, &two, true), 8) && !passes(&whole(0, good, false), REFUSED));
}
