//! CPU backend: round trips, byte compatibility with the reference libraries
//! in both directions, and typed errors for bad input.

use crate::common;

use std::io::{Read, Write};
use std::sync::Arc;

use common::{cpu_algorithms, field_f32, max_input, text, Rng};
use zarrs_nvcomp::{Algorithm, Backend, BatchCodec, DataType, Error};

const MIB: usize = 1 << 20;

fn cpu(algorithm: Algorithm) -> BatchCodec {
    BatchCodec::new(algorithm, Backend::Cpu).unwrap()
}

fn lz4(has_header: bool) -> Algorithm {
    Algorithm::Lz4 {
        data_type: DataType::Char,
        has_header,
    }
}

/// Encodes and decodes `inputs` both ways (`decode_batch` and
/// `decode_batch_into`) and checks every byte.
fn round_trip(codec: &BatchCodec, inputs: &[Vec<u8>]) {
    let encoded = codec.encode_batch(inputs).unwrap();
    assert_eq!(encoded.len(), inputs.len());
    let enc: Vec<&[u8]> = encoded.iter().collect();
    let decoded = codec.decode_batch(&enc).unwrap();
    assert_eq!(decoded.len(), inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        assert!(
            decoded.get(i) == input.as_slice(),
            "{:?}: buffer {i} of {} bytes differs",
            codec.algorithm(),
            input.len()
        );
    }
    let mut outs: Vec<Vec<u8>> = inputs.iter().map(|b| vec![0xAA; b.len()]).collect();
    let mut out_refs: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    codec.decode_batch_into(&enc, &mut out_refs).unwrap();
    assert!(outs == inputs, "{:?}: decode_batch_into differs", codec.algorithm());
}

#[test]
fn every_algorithm_round_trips_mixed_sizes() {
    let mut rng = Rng(1);
    for alg in cpu_algorithms() {
        let sizes = [0, 1, 2, 3, 17, 1023, 4096, 65_535, 65_536, 65_537, 131_073, 300_001];
        let mut inputs = Vec::new();
        for (k, &n) in sizes.iter().filter(|n| **n <= max_input(&alg)).enumerate() {
            inputs.push(match k % 3 {
                0 => rng.bytes(n),
                1 => field_f32(n, k as u64),
                _ => text(n),
            });
        }
        round_trip(&cpu(alg), &inputs);
    }
}

#[test]
fn batches_of_zero_one_and_many_buffers() {
    for alg in [
        lz4(true),
        lz4(false),
        Algorithm::Snappy,
        Algorithm::Zstd,
        Algorithm::Gzip { algorithm: 0 },
    ] {
        let codec = cpu(alg);
        round_trip(&codec, &[]);
        round_trip(&codec, &[text(5)]);
    }
    let mut rng = Rng(2);
    let many: Vec<Vec<u8>> = (0..100_000).map(|i| rng.bytes(i % 37)).collect();
    for alg in [
        lz4(true),
        Algorithm::Zstd,
        Algorithm::Deflate { algorithm: 0 },
        Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        },
    ] {
        round_trip(&cpu(alg), &many);
    }
}

#[test]
fn buffers_of_64_mib_round_trip() {
    let big = field_f32(64 * MIB, 3);
    for alg in [
        lz4(true),
        Algorithm::Snappy,
        Algorithm::Zstd,
        Algorithm::Deflate { algorithm: 0 },
        Algorithm::Gzip { algorithm: 0 },
        Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        },
    ] {
        let codec = cpu(alg);
        let encoded = codec.encode_batch(&[&big[..], b"x"]).unwrap();
        let decoded = codec.decode_batch(&encoded.iter().collect::<Vec<_>>()).unwrap();
        assert!(decoded.get(0) == big.as_slice(), "{alg:?}");
        assert_eq!(decoded.get(1), b"x");
    }
}

#[test]
fn lz4_matches_numcodecs_layout_and_lz4_flex() {
    let data = field_f32(100_003, 4);
    let ours = cpu(lz4(true)).encode_batch(&[&data]).unwrap();
    let ours = ours.get(0);
    assert_eq!(&ours[..4], &(data.len() as u32).to_le_bytes());
    assert_eq!(lz4_flex::block::decompress(&ours[4..], data.len()).unwrap(), data);
    // The reverse: a header written by hand in front of lz4_flex's block.
    let mut theirs = (data.len() as u32).to_le_bytes().to_vec();
    theirs.extend_from_slice(&lz4_flex::block::compress(&data));
    assert_eq!(cpu(lz4(true)).decode_batch(&[&theirs]).unwrap().get(0), data.as_slice());
    // Bare blocks, both ways.
    let bare = lz4_flex::block::compress(&data);
    assert_eq!(cpu(lz4(false)).decode_batch(&[&bare]).unwrap().get(0), data.as_slice());
    let ours_bare = cpu(lz4(false)).encode_batch(&[&data]).unwrap();
    assert_eq!(lz4_flex::block::decompress(ours_bare.get(0), data.len()).unwrap(), data);
}

#[test]
fn zstd_matches_the_reference_library() {
    let data = text(250_000);
    let ours = cpu(Algorithm::Zstd).encode_batch(&[&data]).unwrap();
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(ours.get(0)).unwrap(),
        Some(data.len() as u64)
    );
    assert_eq!(zstd::bulk::decompress(ours.get(0), data.len()).unwrap(), data);
    // A streamed frame (no content size) with a checksum.
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    enc.write_all(&data).unwrap();
    let streamed = enc.finish().unwrap();
    assert_eq!(zstd::zstd_safe::get_frame_content_size(&streamed).unwrap(), None);
    let bulk = zstd::bulk::compress(&data, 19).unwrap();
    round_trip_foreign(
        Algorithm::Zstd,
        &[streamed.clone(), bulk],
        &[data.clone(), data.clone()],
    );
    // A streamed frame larger than the first guess decodes through growth.
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    enc.write_all(&vec![0u8; 5 * MIB]).unwrap();
    round_trip_foreign(Algorithm::Zstd, &[enc.finish().unwrap()], &[vec![0u8; 5 * MIB]]);
    // A corrupted checksum is detected.
    let mut bad = streamed;
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(matches!(
        cpu(Algorithm::Zstd).decode_batch(&[&bad]),
        Err(Error::Corrupt { index: 0, .. })
    ));
}

/// Decodes buffers made by a reference library with both decode entry points.
fn round_trip_foreign(alg: Algorithm, encoded: &[Vec<u8>], expected: &[Vec<u8>]) {
    let codec = cpu(alg);
    let decoded = codec.decode_batch(encoded).unwrap();
    assert_eq!(decoded.to_vecs(), expected, "{alg:?}");
    let mut outs: Vec<Vec<u8>> = expected.iter().map(|b| vec![0; b.len()]).collect();
    let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    codec.decode_batch_into(encoded, &mut refs).unwrap();
    assert_eq!(outs, expected, "{alg:?}");
}

#[test]
fn deflate_matches_flate2_and_miniz() {
    let data = field_f32(333_333, 5);
    for algorithm in [0, 1, 5] {
        let ours = cpu(Algorithm::Deflate { algorithm }).encode_batch(&[&data]).unwrap();
        assert_eq!(miniz_oxide::inflate::decompress_to_vec(ours.get(0)).unwrap(), data);
        let mut theirs = Vec::new();
        flate2::read::DeflateDecoder::new(ours.get(0))
            .read_to_end(&mut theirs)
            .unwrap();
        assert_eq!(theirs, data);
    }
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&data).unwrap();
    let from_flate2 = enc.finish().unwrap();
    let from_miniz = miniz_oxide::deflate::compress_to_vec(&data, 6);
    let stored = miniz_oxide::deflate::compress_to_vec(&data, 0);
    let expect = vec![data.clone(), data.clone(), data.clone()];
    round_trip_foreign(
        Algorithm::Deflate { algorithm: 0 },
        &[from_flate2, from_miniz, stored],
        &expect,
    );
}

#[test]
fn gzip_matches_flate2() {
    let data = text(123_457);
    let mut enc = flate2::GzBuilder::new()
        .filename("data.bin")
        .comment("c")
        .write(Vec::new(), flate2::Compression::fast());
    enc.write_all(&data).unwrap();
    let theirs = enc.finish().unwrap();
    round_trip_foreign(Algorithm::Gzip { algorithm: 3 }, &[theirs], &[data]);
}

#[test]
fn gzip_output_is_read_by_flate2() {
    let data = text(123_457);
    let ours = cpu(Algorithm::Gzip { algorithm: 1 })
        .encode_batch(&[data.as_slice(), &[]])
        .unwrap();
    for (i, expected) in [data, vec![]].iter().enumerate() {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(ours.get(i)).read_to_end(&mut out).unwrap();
        assert_eq!(&out, expected);
    }
}

#[test]
fn snappy_matches_snap() {
    let data = field_f32(200_001, 6);
    let theirs = snap::raw::Encoder::new().compress_vec(&data).unwrap();
    round_trip_foreign(
        Algorithm::Snappy,
        &[theirs, snap::raw::Encoder::new().compress_vec(&[]).unwrap()],
        &[data.clone(), vec![]],
    );
    let ours = cpu(Algorithm::Snappy).encode_batch(&[&data]).unwrap();
    assert_eq!(snap::raw::Decoder::new().decompress_vec(ours.get(0)).unwrap(), data);
}

/// The decoded length and the pages of a buffer of zarrs' `gdeflate` layout,
/// read as zarrs writes it: u64 LE decoded length, page count and page
/// sizes, then the pages.
fn gdeflate_pages(buf: &[u8]) -> (usize, Vec<&[u8]>) {
    let word = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().unwrap()) as usize;
    let mut at = 8 * (2 + word(1));
    let mut pages = Vec::new();
    for i in 0..word(1) {
        pages.push(&buf[at..at + word(2 + i)]);
        at += word(2 + i);
    }
    assert_eq!(at, buf.len(), "nothing follows the last page");
    (word(0), pages)
}

#[test]
fn gdeflate_layout_is_zarrs() {
    let data = text(150_000);
    let ours = cpu(Algorithm::Gdeflate {
        algorithm: 1,
        has_header: true,
    })
    .encode_batch(&[&data])
    .unwrap();
    let (decoded_len, pages) = gdeflate_pages(ours.get(0));
    assert_eq!(decoded_len, data.len());
    assert_eq!(pages.len(), 3);
    // Each page is one bare stream: the has_header=false decoder reads it alone.
    let bare = cpu(Algorithm::Gdeflate {
        algorithm: 1,
        has_header: false,
    });
    let pages = bare.decode_batch(&pages).unwrap();
    assert_eq!(pages.data(), data.as_slice());
    let err = bare.encode_batch(&[&data[..10], &data]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputTooLarge {
                index: 1,
                limit: 65_536,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn corrupt_and_truncated_buffers_name_their_index() {
    let data = field_f32(100_000, 7);
    for alg in cpu_algorithms() {
        let codec = cpu(alg);
        let d = &data[..data.len().min(max_input(&alg))];
        let enc = codec.encode_batch(&[d, d, d]).unwrap();
        let good = enc.get(0);
        let truncated = &good[..good.len() / 2];
        let garbage = Rng(8).bytes(good.len());
        let declared_size = !matches!(
            alg,
            Algorithm::Lz4 { has_header: false, .. }
                | Algorithm::Deflate { .. }
                | Algorithm::Gdeflate { has_header: false, .. }
        );
        let mut bad_inputs = vec![garbage.as_slice()];
        if declared_size || matches!(alg, Algorithm::Deflate { .. }) {
            bad_inputs.push(truncated);
        }
        for bad in bad_inputs {
            let err = codec.decode_batch(&[good, good, bad]).unwrap_err();
            // Garbage or a truncated gzip trailer may read as a huge size.
            let huge = matches!(err, Error::DecodedSizeTooLarge { index: 2, .. });
            assert!(huge || matches!(err, Error::Corrupt { index: 2, .. }), "{alg:?}: {err}");
            assert!(err.to_string().contains("buffer 2"), "{err}");
        }
    }
}

#[test]
fn absurd_declared_sizes_are_refused_before_allocating() {
    let limit = MIB as u64;
    let too_large = |alg: Algorithm, buf: &[u8], size: u64| {
        let codec = cpu(alg).with_max_decoded_size(limit);
        let empty = codec.encode_batch(&[b""]).unwrap();
        let err = codec.decode_batch(&[empty.get(0), buf]).unwrap_err();
        match err {
            Error::DecodedSizeTooLarge {
                index: 1,
                size: s,
                limit: l,
            } if s == size && l == limit => {}
            other => panic!("{alg:?}: {other:?}"),
        }
    };
    too_large(lz4(true), &[0xff, 0xff, 0xff, 0xff, 0x00], 0xFFFF_FFFF);
    let mut gd = u64::MAX.to_le_bytes().to_vec();
    gd.extend_from_slice(&[0; 8]);
    too_large(
        Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        },
        &gd,
        u64::MAX,
    );
    let mut gd = (1u64 << 40).to_le_bytes().to_vec();
    gd.extend_from_slice(&(1u64 << 24).to_le_bytes());
    too_large(
        Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        },
        &gd,
        1 << 40,
    );
    too_large(Algorithm::Snappy, &[0xff, 0xff, 0xff, 0xff, 0x0f], 0xFFFF_FFFF);
    let mut gz = cpu(Algorithm::Gzip { algorithm: 0 })
        .encode_batch(&[b"abc"])
        .unwrap()
        .get(0)
        .to_vec();
    let n = gz.len();
    gz[n - 4..].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    // gzip's ISIZE is a hint only (a stream may hold several members, and it
    // is the length modulo 4 GiB): a lying one is found out by decoding, into
    // no more than the bytes can expand to.
    let err = cpu(Algorithm::Gzip { algorithm: 0 })
        .with_max_decoded_size(limit)
        .decode_batch(&[&gz])
        .unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { index: 0, .. }) && err.to_string().contains("modulo 4 GiB"),
        "{err}"
    );
    let frame = zstd::bulk::compress(&vec![0u8; 2 * MIB], 1).unwrap();
    too_large(Algorithm::Zstd, &frame, 2 * MIB as u64);
    // Under the limit but beyond what the bytes can expand to: corrupt.
    let err = cpu(lz4(true))
        .decode_batch(&[&[0x00, 0x00, 0x00, 0x40, 0x00][..]])
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { index: 0, .. }), "{err}");
    // Unknown sizes: growth stops at the limit.
    let deflated = miniz_oxide::deflate::compress_to_vec(&vec![0u8; 2 * MIB], 6);
    let err = cpu(Algorithm::Deflate { algorithm: 0 })
        .with_max_decoded_size(limit)
        .decode_batch(&[&deflated]);
    assert!(
        matches!(err, Err(Error::DecodedSizeTooLarge { index: 0, .. })),
        "{err:?}"
    );
}

#[test]
fn wrong_output_sizes_are_refused() {
    for alg in [
        lz4(true),
        lz4(false),
        Algorithm::Zstd,
        Algorithm::Deflate { algorithm: 0 },
        Algorithm::Gdeflate {
            algorithm: 0,
            has_header: false,
        },
    ] {
        let codec = cpu(alg);
        let data = text(1000);
        let enc = codec.encode_batch(&[&data, &data]).unwrap();
        let (mut a, mut b) = (vec![0; 1000], vec![0; 999]);
        let err = codec
            .decode_batch_into(&enc.iter().collect::<Vec<_>>(), &mut [&mut a, &mut b])
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::OutputSize {
                    index: 1,
                    expected: 999,
                    actual: 1000
                }
            ),
            "{alg:?}: {err}"
        );
        let mut c = vec![0; 1001];
        let err = codec
            .decode_batch_into(&enc.iter().collect::<Vec<_>>(), &mut [&mut a, &mut c])
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::OutputSize {
                    index: 1,
                    expected: 1001,
                    actual: 1000
                }
            ),
            "{alg:?}: {err}"
        );
        let err = codec
            .decode_batch_into(&enc.iter().collect::<Vec<_>>(), &mut [&mut a])
            .unwrap_err();
        assert!(matches!(err, Error::BatchLength { inputs: 2, outputs: 1 }), "{err}");
    }
}

#[test]
fn gpu_only_algorithms_say_so() {
    for name in ["cascaded", "bitcomp", "ans"] {
        let codec = BatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap();
        let err = codec.encode_batch(&[b"abc"]).unwrap_err();
        assert!(
            matches!(err, Error::NeedsGpu { algorithm } if algorithm == name),
            "{err}"
        );
        assert!(matches!(codec.decode_batch(&[b"abc"]), Err(Error::NeedsGpu { .. })));
        assert!(matches!(
            codec.decode_batch_into(&[b"abc"], &mut [&mut [0u8; 3]]),
            Err(Error::NeedsGpu { .. })
        ));
    }
}

#[test]
fn one_codec_serves_many_threads() {
    let codec = Arc::new(cpu(Algorithm::Zstd));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let codec = Arc::clone(&codec);
            std::thread::spawn(move || {
                for round in 0..20 {
                    let inputs: Vec<Vec<u8>> = (0..10)
                        .map(|i| field_f32(1000 * i + round, t * 100 + i as u64))
                        .collect();
                    round_trip(&codec, &inputs);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
}

/// Zstandard frames back to back, as numcodecs' `Zstd` reads them: a frame
/// with its size, a streamed one, skippable frames between them.
fn concatenated_zstd() -> (Vec<u8>, Vec<u8>) {
    let a = field_f32(100_000, 3);
    let b = text(70_000);
    let sized = zstd::bulk::compress(&a, 1).unwrap();
    let mut streamed = Vec::new();
    let mut enc = zstd::stream::Encoder::new(&mut streamed, 3).unwrap();
    enc.include_checksum(true).unwrap();
    enc.write_all(&b).unwrap();
    enc.finish().unwrap();
    let mut skippable = 0x184D_2A53u32.to_le_bytes().to_vec();
    skippable.extend(4u32.to_le_bytes());
    skippable.extend(b"note");
    let buf = [&skippable[..], &sized, &skippable, &streamed, &sized].concat();
    (buf, [&a[..], &b, &a].concat())
}

#[test]
fn concatenated_zstd_frames_decode() {
    let (buf, expected) = concatenated_zstd();
    let codec = cpu(Algorithm::Zstd);
    let decoded = codec.decode_batch(&[buf.as_slice(), &buf]).unwrap();
    assert!(decoded.get(0) == expected.as_slice() && decoded.get(1) == expected.as_slice());
    let mut out = vec![0u8; expected.len()];
    codec.decode_batch_into(&[buf.as_slice()], &mut [&mut out]).unwrap();
    assert!(out == expected);
    // Frames that all declare their size: declared together, decoded in place.
    let sized = zstd::bulk::compress(&expected[..5000], 1).unwrap();
    let twice = [&sized[..], &sized].concat();
    assert!(codec.decode_batch(&[twice.as_slice()]).unwrap().get(0) == [&expected[..5000], &expected[..5000]].concat());
    // A limit applies to the frames together.
    let err = cpu(Algorithm::Zstd)
        .with_max_decoded_size(9999)
        .decode_batch(&[twice.as_slice()])
        .unwrap_err();
    assert!(matches!(err, Error::DecodedSizeTooLarge { size: 10_000, .. }), "{err}");
    // Garbage after the last frame is an error, not ignored.
    let padded = [&twice[..], b"junk"].concat();
    assert!(matches!(
        codec.decode_batch(&[padded.as_slice()]),
        Err(Error::Corrupt { index: 0, .. })
    ));
}

#[test]
fn zstd_chunk_over_2_gib_round_trips() {
    // 2 GiB + 1 MiB, the chunk of issue 8. `vec![0; n]` is calloc: the input
    // pages are mapped lazily and only read, so the decoded chunk is the one
    // large resident allocation.
    let size = (2 << 30) + MIB;
    let tail: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let mut data = vec![0u8; size];
    data[size - tail.len()..].copy_from_slice(&tail);
    let codec = cpu(Algorithm::Zstd);
    assert_eq!(codec.max_decoded_size(), zarrs_nvcomp::default_max_decoded_size());
    let encoded = codec.encode_batch(&[data.as_slice()]).unwrap();
    drop(data);
    let decoded = codec.decode_batch(&[encoded.get(0)]).unwrap();
    let out = decoded.get(0);
    assert_eq!(out.len(), size);
    let zeros = vec![0u8; MIB];
    let body = &out[..size - tail.len()];
    assert!(body.chunks(MIB).all(|c| c == &zeros[..c.len()]));
    assert!(out[size - tail.len()..] == tail[..]);
}

#[test]
fn decoded_size_limit_is_configurable_and_its_error_says_how() {
    let codec = cpu(Algorithm::Zstd);
    let encoded = codec.encode_batch(&[vec![7u8; 5000]]).unwrap();
    let err = codec
        .clone()
        .with_max_decoded_size(4999)
        .decode_batch(&[encoded.get(0)])
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::DecodedSizeTooLarge {
                size: 5000,
                limit: 4999,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("max_decoded_size") && msg.contains("with_max_decoded_size"),
        "{msg}"
    );
    let exact = codec.with_max_decoded_size(5000);
    assert_eq!(exact.max_device_decoded_size(), 5000);
    assert_eq!(exact.decode_batch(&[encoded.get(0)]).unwrap().get(0), &[7u8; 5000][..]);
}
