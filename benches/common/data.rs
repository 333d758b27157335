//! The benchmark data: float32 values of a seeded random walk rounded to
//! 0.01 (like a smooth geoscience field), as little-endian bytes.

/// `n` bytes of the random-walk field.
pub(crate) fn field_f32(n: usize) -> Vec<u8> {
    let mut state = 0x5EED_u64;
    let mut x = 0f32;
    let mut out = Vec::with_capacity(n + 4);
    while out.len() < n {
        // SplitMix64 step.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        x += ((z >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1;
        out.extend_from_slice(&((x * 100.0).round() / 100.0).to_le_bytes());
    }
    out.truncate(n);
    out
}
