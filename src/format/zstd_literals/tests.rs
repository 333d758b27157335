use super::super::zstd::frames;
use super::DecodeHere;

/// The whole check on the host.
fn check_frames(buf: &[u8]) -> Result<(), String> {
    super::super::zstd::check_frames(buf, &mut DecodeHere::default())
}

/// A seeded xorshift64 generator.
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Bytes of several kinds: float32 walks, text-like bytes, noise, runs.
pub(crate) fn samples(len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut next = xorshift(seed);
    let mut walk = 0f32;
    let field: Vec<u8> = (0..len.div_ceil(4))
        .flat_map(|_| {
            walk += (next() % 2001) as f32 / 1000.0 - 1.0;
            ((walk * 100.0).round() / 100.0).to_le_bytes()
        })
        .take(len)
        .collect();
    let text: Vec<u8> = (0..len).map(|_| b"etaoin shrdlu,.\n"[(next() % 16) as usize]).collect();
    let skewed: Vec<u8> = (0..len).map(|_| (next() % 200).leading_zeros() as u8).collect();
    let noise: Vec<u8> = (0..len).map(|_| next() as u8).collect();
    vec![field, text, skewed, noise, vec![9u8; len]]
}

/// libzstd's verdict on one buffer, decoded as `cpu::zstd` decodes it:
/// in one call into the declared size where every frame declares one,
/// with the streaming decoder otherwise.
fn cpu_accepts(buf: &[u8]) -> bool {
    let Ok(frames) = frames(buf) else {
        return false;
    };
    match frames.iter().map(|f| f.content_size).sum::<Option<u64>>() {
        Some(total) if total <= 1 << 24 => zstd::bulk::decompress(buf, total as usize).is_ok(),
        Some(_) => false,
        None => zstd::stream::decode_all(buf).is_ok(),
    }
}

/// A generator of mutations: bit flips, XOR runs, zeroed ranges and
/// random bytes, anywhere past the magic number and the frame descriptor.
fn mutants(frame: &[u8], n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|_| {
            let mut bad = frame.to_vec();
            let len = bad.len();
            let at = 6 + (next() as usize) % (len - 6);
            match next() % 4 {
                0 => bad[at] ^= 1 << (next() % 8),
                1 => {
                    let run = 1 + (next() as usize) % 16;
                    for b in bad[at..(at + run * 7).min(len)].iter_mut().step_by(7) {
                        *b ^= 0x5A;
                    }
                }
                2 => {
                    let end = (at + 1 + (next() as usize) % 8).min(len);
                    bad[at..end].fill(0);
                }
                _ => bad[at] = next() as u8,
            }
            bad
        })
        .collect()
}

#[test]
fn frames_of_every_level_kind_and_size_pass() {
    for (s, len) in [0usize, 1, 7, 100, 1000, 5000, 70_000, 131_072, 300_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        for data in samples(len, 100 + s as u64) {
            for level in [-5, -1, 1, 2, 3, 5, 9, 12, 19, 22] {
                let frame = zstd::bulk::compress(&data, level).unwrap();
                assert_eq!(check_frames(&frame), Ok(()), "{len} bytes, level {level}");
                if level % 2 == 0 {
                    continue;
                }
                // Streamed (no content size), with a checksum.
                let mut streamed = Vec::new();
                let mut enc = zstd::stream::Encoder::new(&mut streamed, level).unwrap();
                enc.include_checksum(true).unwrap();
                std::io::Write::write_all(&mut enc, &data).unwrap();
                enc.finish().unwrap();
                assert_eq!(check_frames(&streamed), Ok(()), "{len} bytes, level {level}, streamed");
            }
        }
    }
}

#[test]
fn matches_across_blocks_and_repeats_far_back_pass() {
    // 3 MiB of a 700 KiB pattern: matches reach 700 KiB back, over many
    // blocks, within level 19's window; level 1's window is smaller, so
    // its frames must not use them.
    let pattern = samples(700 << 10, 9).swap_remove(0);
    let data: Vec<u8> = pattern.iter().cycle().take(3 << 20).copied().collect();
    for level in [1, 3, 19] {
        let frame = zstd::bulk::compress(&data, level).unwrap();
        if level == 19 {
            assert!(frame.len() < data.len() / 4, "level {level} found the repeats");
        }
        assert_eq!(check_frames(&frame), Ok(()), "level {level}");
    }
}

#[test]
fn mutated_frames_pass_only_where_the_cpu_decodes_them() {
    // Every mutant the checks pass must decode on the CPU (the GPU path
    // is never less safe). Those the checks refuse and libzstd still
    // decodes must break RFC 8878 in a way the module docs name:
    // libzstd's fast Huffman decoder does not check where its streams
    // end, so it decodes many streams that are not consumed exactly.
    let (mut checked, mut rejected, mut stricter) = (0, 0, Vec::new());
    for (s, len) in [300usize, 5000, 70_000, 300_000].into_iter().enumerate() {
        for (k, data) in samples(len, 7 + s as u64).into_iter().enumerate() {
            for level in [1, 3, 9] {
                let frame = zstd::bulk::compress(&data, level).unwrap();
                if frame.len() < 16 {
                    continue;
                }
                for bad in mutants(&frame, 150, (s * 100 + k * 10) as u64 + level as u64) {
                    checked += 1;
                    let cpu = cpu_accepts(&bad);
                    match check_frames(&bad) {
                        Ok(()) => assert!(
                            cpu,
                            "{len} bytes, sample {k}, level {level}: passed, but the CPU rejects it"
                        ),
                        Err(why) => {
                            rejected += 1;
                            if cpu {
                                stricter.push(why);
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(rejected > checked / 2, "only {rejected} of {checked} mutants rejected");
    for why in &stricter {
        assert!(
            ["Huffman stream", "no end mark", "window", "block maximum"]
                .iter()
                .any(|class| why.contains(class)),
            "refused what libzstd decodes: {why}"
        );
    }
}

#[test]
fn the_corpus_frames_nvcomp_decoded_are_rejected() {
    let cases = super::super::gpu_corpus("zstd");
    assert!(!cases.is_empty());
    for (name, batch, valid) in &cases {
        for frame in valid {
            assert_eq!(check_frames(frame), Ok(()), "{name}");
        }
        for (i, frame) in batch.iter().enumerate() {
            if check_frames(frame).is_ok() {
                assert!(cpu_accepts(frame), "{name}, buffer {i}: passed, but the CPU rejects it");
            }
        }
        // Buffer 1 is the mutated one in each case: nvCOMP decoded every
        // one of them, and the checks refuse every one.
        assert!(check_frames(&batch[1]).is_err(), "{name}");
    }
}
