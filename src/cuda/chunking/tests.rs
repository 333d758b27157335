//! Tests of [`super`].

use super::*;
use crate::algorithm::DataType;

const LZ4: Algorithm = Algorithm::Lz4 {
    data_type: DataType::Char,
    has_header: true,
};

/// The pieces of one buffer held whole.
fn pieces_of(algorithm: &Algorithm, index: usize, buf: &[u8], max: u64) -> Result<Vec<DecodePiece>> {
    let mut out = Vec::new();
    let ready = decode_pieces(algorithm, index, BufferEnds::of(buf), max, &mut out)?;
    assert_eq!(ready, Pieces::Ready, "the whole buffer is its head");
    Ok(out)
}

#[test]
fn pieces_are_appended_after_those_of_earlier_buffers() {
    let sized = zstd::bulk::compress(&[5u8; 300], 1).unwrap();
    let empty = zstd::bulk::compress(&[], 1).unwrap();
    let first = pieces_of(&Algorithm::Zstd, 0, &sized, 1 << 20).unwrap();
    let mut out = first.clone();
    // An empty frame between two sized ones is dropped, the order kept.
    let buf = [&sized[..], &empty, &sized].concat();
    decode_pieces(&Algorithm::Zstd, 1, BufferEnds::of(&buf), 1 << 20, &mut out).unwrap();
    let ranges: Vec<(usize, Range<usize>)> = out.iter().map(|p| (p.buffer, p.input.clone())).collect();
    let second = sized.len() + empty.len();
    assert_eq!(
        ranges,
        [(0, 0..sized.len()), (1, 0..sized.len()), (1, second..buf.len())]
    );
    // A device buffer whose framing needs the whole buffer appends nothing.
    let gzip = Algorithm::Gzip { algorithm: 0 };
    let mut zeroed = crate::cpu::deflate::gzip_encode(&[7u8; 50], 6, 0).unwrap();
    let n = zeroed.len();
    zeroed[n - gzip::TRAILER_LEN..].fill(0);
    let ends = BufferEnds {
        head: &zeroed[..gzip::MAGIC_LEN],
        tail: &zeroed[n - gzip::TRAILER_LEN..],
        len: n,
    };
    let before = out.len();
    assert_eq!(
        decode_pieces(&gzip, 2, ends, 1 << 20, &mut out).unwrap(),
        Pieces::NeedHead(n)
    );
    assert_eq!(out.len(), before);
    assert_eq!(out[..first.len()], first[..]);
}

#[test]
fn zstd_frames_become_pieces_and_skippable_frames_none() {
    let sized = zstd::bulk::compress(&[5u8; 3000], 1).unwrap();
    let mut streamed = Vec::new();
    let mut enc = zstd::stream::Encoder::new(&mut streamed, 1).unwrap();
    std::io::Write::write_all(&mut enc, &[6u8; 100]).unwrap();
    enc.finish().unwrap();
    let empty = zstd::bulk::compress(&[], 1).unwrap();
    let skippable = [&0x184D_2A50u32.to_le_bytes()[..], &2u32.to_le_bytes(), b"hi"].concat();
    let buf = [&sized[..], &skippable, &empty, &streamed].concat();
    let at = sized.len() + skippable.len() + empty.len();
    let pieces = pieces_of(&Algorithm::Zstd, 2, &buf, 1 << 20).unwrap();
    let piece = |input: Range<usize>, decoded| DecodePiece {
        buffer: 2,
        input,
        decoded,
        check: None,
    };
    // The empty frame decodes to nothing and is left out.
    assert_eq!(
        pieces,
        vec![piece(0..sized.len(), Some(3000)), piece(at..buf.len(), None)]
    );
    // The limit applies to the declared sizes together.
    let twice = [&sized[..], &sized].concat();
    assert!(matches!(
        pieces_of(&Algorithm::Zstd, 2, &twice, 5999),
        Err(Error::DecodedSizeTooLarge {
            index: 2,
            size: 6000,
            ..
        })
    ));
    assert!(matches!(
        pieces_of(&Algorithm::Zstd, 2, &buf[..buf.len() - 1], 1 << 20),
        Err(Error::Corrupt { index: 2, .. })
    ));
}

#[test]
fn zstd_frames_declaring_more_than_their_blocks_hold_are_refused() {
    // Single segment, 4-byte content size of 1 GiB, then one last RLE
    // block of 100 bytes: a frame that would have 1 GiB allocated.
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0xA0];
    frame.extend((1u32 << 30).to_le_bytes());
    frame.extend([0x23, 0x03, 0x00, 0x55]);
    let err = pieces_of(&Algorithm::Zstd, 4, &frame, 1 << 31).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { index: 4, reason } if reason.contains("declares 1073741824 bytes")),
        "{err}"
    );
    frame[5..9].copy_from_slice(&100u32.to_le_bytes());
    assert_eq!(
        pieces_of(&Algorithm::Zstd, 4, &frame, 1 << 31).unwrap()[0].decoded,
        Some(100)
    );
}

/// Frames of few sequences are walked by the host check, and refused
/// there; frames of many are left to the device, whole, unless all of
/// them hold few enough.
#[test]
fn the_host_walks_frames_of_few_sequences_and_leaves_the_others() {
    // Words drawn from 64: matches of a word or two, many to a block.
    let mut next = format::zstd::xorshift(11);
    let text: Vec<u8> = (0..50_000)
        .flat_map(|_| (next() % 64 * 0x0101_0307).to_le_bytes()[..4].to_vec())
        .collect();
    let many = zstd::bulk::compress(&text, 1).unwrap();
    let few = zstd::bulk::compress(&text[..4000], 1).unwrap();
    let host_walk = (HOST_WALK_SEQUENCES, 0);
    let checked = check_on_host_walking(&Algorithm::Zstd, &[&few, &many], None, host_walk).unwrap();
    let [kept] = &checked.sequences[..] else {
        panic!("{} frames kept", checked.sequences.len())
    };
    assert_eq!(kept.buffer, 1);
    assert!(kept.frame.sequences() >= HOST_WALK_SEQUENCES);
    let mut kept_few = format::zstd::Defer::default();
    format::zstd::check_frames(&few, &mut kept_few).unwrap();
    let walked: u64 = kept_few
        .sequences
        .iter()
        .map(format::zstd::FrameSequences::sequences)
        .sum();
    assert!((1..HOST_WALK_SEQUENCES).contains(&walked), "{walked} sequences");
    // A frame of few sequences that lies about its size fails the check.
    let mut wrong = few.clone();
    let frame = format::zstd::frames(&few).unwrap().remove(0);
    assert_eq!(frame.content_size, Some(4000));
    let size_at = few
        .windows(2)
        .position(|w| w == (4000u16 - 256).to_le_bytes())
        .expect("the size field");
    wrong[size_at] = 0x91;
    let err = check_on_host_walking(&Algorithm::Zstd, &[&many, &wrong], None, host_walk).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { index: 1, reason } if reason.contains("decodes to") || reason.contains("match reaches")),
        "{err}"
    );
    // Few enough sequences in all: none left to the device.
    let all_here = (HOST_WALK_SEQUENCES, kept.frame.sequences());
    let checked = check_on_host_walking(&Algorithm::Zstd, &[&few, &many], None, all_here).unwrap();
    assert!(checked.sequences.is_empty());
    let mut wrong_many = many.clone();
    let size_at = 5 + usize::from(wrong_many[4] & 0x20 == 0);
    wrong_many[size_at] ^= 1;
    let err = check_on_host_walking(&Algorithm::Zstd, &[&few, &wrong_many], None, all_here).unwrap_err();
    assert!(matches!(&err, Error::Corrupt { index: 1, .. }), "{err}");
}

#[test]
fn lz4_header_becomes_the_decoded_size_and_is_skipped() {
    let block = lz4_flex::block::compress(&[7u8; 16]);
    let buf = [&16u32.to_le_bytes()[..], &block].concat();
    let pieces = pieces_of(&LZ4, 3, &buf, 1 << 20).unwrap();
    assert_eq!(
        pieces,
        vec![DecodePiece {
            buffer: 3,
            input: 4..buf.len(),
            decoded: Some(16),
            check: None,
        }]
    );
    // A block that does not decode to its declared size never reaches nvCOMP.
    let wrong = [&17u32.to_le_bytes()[..], &block].concat();
    assert!(matches!(
        pieces_of(&LZ4, 3, &wrong, 1 << 20),
        Err(Error::Corrupt { index: 3, .. })
    ));
    assert!(matches!(
        pieces_of(&LZ4, 3, &buf[..2], 1 << 20),
        Err(Error::Corrupt { index: 3, .. })
    ));
    let huge = [0xff, 0xff, 0xff, 0xff, 0];
    assert!(matches!(
        pieces_of(&LZ4, 1, &huge, 1 << 20),
        Err(Error::DecodedSizeTooLarge { index: 1, .. })
    ));
    assert!(pieces_of(&LZ4, 0, &[0, 0, 0, 0, 0], 10).unwrap().is_empty());
}

#[test]
fn a_buffer_declaring_nothing_must_decode_to_nothing() {
    let gzip = Algorithm::Gzip { algorithm: 0 };
    let empty = crate::cpu::deflate::gzip_encode(&[], 6, 0).unwrap();
    assert!(pieces_of(&gzip, 0, &empty, 1 << 20).unwrap().is_empty());
    // A zeroed trailer (size 0, CRC-32 0) in front of a real body: the
    // fuzz corpus's gzip-zero_range case, which the GPU once returned empty.
    let mut zeroed = crate::cpu::deflate::gzip_encode(&[7u8; 5000], 6, 0).unwrap();
    let n = zeroed.len();
    zeroed[n - gzip::TRAILER_LEN..].fill(0);
    assert!(matches!(
        pieces_of(&gzip, 2, &zeroed, 1 << 20),
        Err(Error::Corrupt { index: 2, .. })
    ));
    // Device buffers hand over their ends only: the whole buffer is asked for.
    let ends = BufferEnds {
        head: &zeroed[..gzip::MAGIC_LEN],
        tail: &zeroed[n - gzip::TRAILER_LEN..],
        len: n,
    };
    assert_eq!(
        decode_pieces(&gzip, 2, ends, 1 << 20, &mut Vec::new()).unwrap(),
        Pieces::NeedHead(n)
    );
    // An LZ4 size header of 0 before a block that holds bytes.
    let block = lz4_flex::block::compress(&[3u8; 100]);
    let lying = [&0u32.to_le_bytes()[..], &block].concat();
    assert!(matches!(
        pieces_of(&LZ4, 1, &lying, 1 << 20),
        Err(Error::Corrupt { index: 1, .. })
    ));
}

#[test]
fn gdeflate_pages_become_pieces() {
    let alg = Algorithm::Gdeflate {
        algorithm: 0,
        has_header: true,
    };
    let buf = gdeflate::write(gdeflate::PAGE_SIZE + 5, [&b"abc"[..], b"de"].into_iter());
    let pieces = pieces_of(&alg, 0, &buf, 1 << 30).unwrap();
    let head = &buf[..20];
    let partial = BufferEnds {
        head,
        tail: &buf[buf.len() - 4..],
        len: buf.len(),
    };
    assert_eq!(
        decode_pieces(&alg, 0, partial, 1 << 30, &mut Vec::new()).unwrap(),
        Pieces::NeedHead(32)
    );
    assert!(!partial.is_whole());
    assert!(pieces_of(&alg, 0, &buf[..buf.len() - 1], 1 << 30).is_err());
    assert_eq!(pieces.len(), 2);
    assert_eq!(&buf[pieces[0].input.clone()], b"abc");
    assert_eq!(pieces[0].decoded, Some(gdeflate::PAGE_SIZE));
    assert_eq!(&buf[pieces[1].input.clone()], b"de");
    assert_eq!(pieces[1].decoded, Some(5));
}

#[test]
fn deflate_streams_are_left_to_the_device_walk() {
    // Whatever their content: the walk decides (`gate::inflate`).
    let (bad, good) = (&[3u8, 2, 0][..], &[0x4b, 4, 2, 0][..]);
    let deflate = Algorithm::Deflate { algorithm: 0 };
    let kept = check_on_host(&deflate, &[good, bad], None).unwrap();
    let stream = |buffer, stream, whole| DeflateStream { buffer, stream, whole };
    assert_eq!(kept.deflate, [stream(0, 0..4, false), stream(1, 0..3, false)]);
    // A gzip member's body, between its header and its trailer, which its
    // stream must take whole; a member without a header is refused here.
    let gzip = Algorithm::Gzip { algorithm: 0 };
    let member = [&gzip::HEADER[..], good, &gzip::Trailer::of(b"aaaa").to_bytes()].concat();
    let body = gzip::HEADER.len()..gzip::HEADER.len() + good.len();
    let kept = check_on_host(&gzip, &[&member, &member], None).unwrap();
    assert_eq!(kept.deflate, [stream(0, body.clone(), true), stream(1, body, true)]);
    assert!(matches!(
        check_on_host(&gzip, &[&member, &member[..5]], None),
        Err(Error::Corrupt { index: 1, .. })
    ));
    assert!(inflates(&deflate) && inflates(&gzip) && !inflates(&Algorithm::Zstd));
    assert!(checked_on_host(&Algorithm::Zstd, false) && !checked_on_host(&LZ4, false));
}

#[test]
fn raw_lz4_blocks_of_exact_sizes_are_walked_on_the_host() {
    let raw = Algorithm::Lz4 {
        data_type: DataType::Char,
        has_header: false,
    };
    assert!(checked_on_host(&raw, true) && !checked_on_host(&raw, false) && !checked_on_host(&LZ4, true));
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 ^ (i / 700) as u8).collect();
    let good = lz4_flex::block::compress(&data);
    let n = data.len();
    assert!(check_on_host(&raw, &[&good, &good], Some(&[n, n])).is_ok());
    // A size other than the block's, and a block cut short, are refused,
    // naming the buffer, as the CPU refuses them.
    for (bufs, sizes, index) in [
        (vec![&good[..], &good[..]], vec![n, n + 1], 1),
        (vec![&good[..good.len() - 3]], vec![n], 0),
    ] {
        let err = check_on_host(&raw, &bufs, Some(&sizes)).unwrap_err();
        assert!(matches!(err, Error::Corrupt { index: i, .. } if i == index), "{err}");
        assert!(lz4_flex::block::decompress(bufs[index], sizes[index]).map_or(true, |d| d.len() != sizes[index]));
    }
    assert!(check_on_host(&raw, &[&good], None).is_err(), "a block without its size");
}

#[test]
fn large_lz4_goes_to_the_cpu_and_large_ans_is_refused() {
    assert_eq!(encode_route(&LZ4, 0, SMALL_CHUNK_LIMIT + 1).unwrap(), EncodeRoute::Cpu);
    assert_eq!(encode_route(&LZ4, 0, 0).unwrap(), EncodeRoute::Cpu);
    assert_eq!(
        encode_route(&LZ4, 0, 10).unwrap(),
        EncodeRoute::Gpu(std::iter::once(0..10).collect())
    );
    let ans = Algorithm::Ans {
        data_type: DataType::Char,
    };
    assert!(matches!(
        encode_route(&ans, 2, SMALL_CHUNK_LIMIT + 1),
        Err(Error::InputTooLarge { index: 2, .. })
    ));
    let gd = Algorithm::Gdeflate {
        algorithm: 0,
        has_header: true,
    };
    assert_eq!(
        encode_route(&gd, 0, gdeflate::PAGE_SIZE + 1).unwrap(),
        EncodeRoute::Gpu(vec![
            0..gdeflate::PAGE_SIZE,
            gdeflate::PAGE_SIZE..gdeflate::PAGE_SIZE + 1
        ])
    );
    assert_eq!(encode_route(&gd, 0, 0).unwrap(), EncodeRoute::Gpu(vec![]));
}

#[test]
fn aligned_ranges_start_each_buffer_at_a_multiple_of_the_alignment() {
    let (ranges, len) = aligned_ranges([5, 0, 16, 1, 3], 16);
    assert_eq!(ranges, [0..5, 16..16, 16..32, 32..33, 48..51]);
    assert_eq!(len, 51);
    assert_eq!(aligned_ranges([], 16), (vec![], 0));
    assert_eq!(aligned_ranges([3, 3], 1), (vec![0..3, 3..6], 6));
}
