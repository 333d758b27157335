//! Data generators and algorithm lists shared by the integration tests.
#![allow(dead_code)]

pub(crate) mod corpus;

use zarrs_nvcomp::{Algorithm, DataType};

/// SplitMix64: a tiny seeded generator, so the tests need no `rand`.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

/// `n` bytes of float32 little-endian values: a seeded random walk rounded
/// to 0.01, like a smooth geoscience field.
pub(crate) fn field_f32(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut x = 0f32;
    let mut out = Vec::with_capacity(n + 4);
    while out.len() < n {
        x += ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1;
        out.extend_from_slice(&((x * 100.0).round() / 100.0).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// `n` bytes of repetitive text.
pub(crate) fn text(n: usize) -> Vec<u8> {
    b"the quick brown fox jumps over the lazy dog; "
        .iter()
        .copied()
        .cycle()
        .take(n)
        .collect()
}

/// Every algorithm and option combination the CPU backend implements.
pub(crate) fn cpu_algorithms() -> Vec<Algorithm> {
    let mut algs = vec![
        Algorithm::Lz4 {
            data_type: DataType::Char,
            has_header: true,
        },
        Algorithm::Lz4 {
            data_type: DataType::Float32,
            has_header: false,
        },
        Algorithm::Snappy,
        Algorithm::Zstd,
    ];
    for algorithm in 0..=5 {
        algs.push(Algorithm::Deflate { algorithm });
        algs.push(Algorithm::Gzip { algorithm });
        algs.push(Algorithm::Gdeflate {
            algorithm,
            has_header: true,
        });
        algs.push(Algorithm::Gdeflate {
            algorithm,
            has_header: false,
        });
    }
    algs
}

/// The largest buffer `algorithm` encodes on the CPU.
pub(crate) fn max_input(algorithm: &Algorithm) -> usize {
    match algorithm {
        Algorithm::Gdeflate { has_header: false, .. } => 64 * 1024,
        _ => usize::MAX,
    }
}

/// `n` uniformly random bytes: incompressible.
pub(crate) fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    Rng(seed).bytes(n)
}

/// Buffers of the given sizes, every third one random, the others a field.
pub(crate) fn mixed_buffers(sizes: &[usize], seed: u64) -> Vec<Vec<u8>> {
    let buffer = |(i, &n): (usize, &usize)| {
        let seed = seed + i as u64;
        if i % 3 == 2 {
            random_bytes(n, seed)
        } else {
            field_f32(n, seed)
        }
    };
    sizes.iter().enumerate().map(buffer).collect()
}
