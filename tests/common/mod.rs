//! Data shared by the integration tests.
#![allow(dead_code)]

/// A seeded xorshift generator, so every run tests the same bytes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// float32 random walk rounded to 0.01, as bytes: compressible like real fields.
pub fn field_f32(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut x = 0f32;
    let mut out = Vec::with_capacity(len + 4);
    while out.len() < len {
        x += (rng.below(2001) as f32 - 1000.0) / 10_000.0;
        out.extend_from_slice(&((x * 100.0).round() / 100.0).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Uniformly random bytes: incompressible.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// Buffers of the given sizes, alternating structured and random content.
pub fn mixed_buffers(sizes: &[usize], seed: u64) -> Vec<Vec<u8>> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            if i % 3 == 2 {
                random_bytes(n, seed + i as u64)
            } else {
                field_f32(n, seed + i as u64)
            }
        })
        .collect()
}
