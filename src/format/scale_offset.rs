//! numcodecs `fixedscaleoffset` undone on a decoded chunk: integers stored
//! as `round((x - offset) * scale)` (`astype`) widened back to floats
//! (`dtype`). [`ScaleOffset::apply`] is the host's implementation; the
//! device's is the `scale_offset` kernel of `cuda/kernels/filters.cu`, which
//! computes the same, element by element.
//!
//! numcodecs decodes with NumPy: `enc / scale + offset`, an integer array
//! divided by a Python number, is computed in float64 whatever the stored
//! integer type, and then converted to `dtype` (rounded to nearest where
//! that is float32). Both implementations do exactly that: the integer
//! converted to binary64 (exactly, or rounded to nearest for 64-bit
//! integers beyond 2^53), an IEEE division and addition, and one rounding to
//! binary32 for a float32 `dtype`. The stored integers are little endian by
//! then (a big-endian `bytes` codec is undone first, on words of the stored
//! type); elements are read and written byte by byte, so neither
//! implementation depends on alignment.

/// A numcodecs `fixedscaleoffset` of integer `astype` and float `dtype`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleOffset {
    /// Bytes of a stored integer: 1, 2, 4 or 8.
    pub stored_size: usize,
    /// Whether the stored integers are signed.
    pub signed: bool,
    /// Whether the decoded elements are float64 (else float32).
    pub wide: bool,
    /// The configuration's `scale`: finite and not zero.
    pub scale: f64,
    /// The configuration's `offset`: finite.
    pub offset: f64,
}

impl ScaleOffset {
    /// Bytes of a decoded element.
    pub fn decoded_size(&self) -> usize {
        if self.wide {
            8
        } else {
            4
        }
    }

    /// The decoded bytes of a chunk that stores `stored_len` bytes.
    pub fn decoded_len(&self, stored_len: usize) -> usize {
        stored_len / self.stored_size * self.decoded_size()
    }

    /// Panics unless both implementations decode these: integers of 1, 2,
    /// 4 or 8 bytes, a finite `scale` other than zero and a finite `offset`
    /// (no NaN can then arise, whose bits the GPU would not keep).
    pub fn assert_valid(&self) {
        assert!(
            matches!(self.stored_size, 1 | 2 | 4 | 8),
            "fixedscaleoffset of {}-byte integers",
            self.stored_size
        );
        assert!(
            self.scale.is_finite() && self.scale != 0.0 && self.offset.is_finite(),
            "fixedscaleoffset of scale {} and offset {}",
            self.scale,
            self.offset
        );
    }

    /// The decoded element of the stored integer `bits` (its low
    /// `stored_size` bytes), as the bits of its float.
    fn decode(&self, bits: u64) -> u64 {
        let shift = 64 - 8 * self.stored_size as u32;
        let value = if self.signed {
            // Sign-extended from the stored width.
            ((bits << shift) as i64 >> shift) as f64
        } else {
            bits as f64
        };
        let decoded = value / self.scale + self.offset;
        if self.wide {
            decoded.to_bits()
        } else {
            u64::from((decoded as f32).to_bits())
        }
    }

    /// Writes the decoded elements of the stored integers `stored` (little
    /// endian) into `out`, which holds [`Self::decoded_len`] bytes of them;
    /// trailing bytes short of a whole integer are ignored.
    ///
    /// # Panics
    /// Where the filter is not valid ([`Self::assert_valid`]) or `out` is
    /// not the decoded length.
    pub fn apply(&self, stored: &[u8], out: &mut [u8]) {
        self.assert_valid();
        assert_eq!(
            out.len(),
            self.decoded_len(stored.len()),
            "fixedscaleoffset output length"
        );
        let width = self.decoded_size();
        for (src, dst) in stored.chunks_exact(self.stored_size).zip(out.chunks_exact_mut(width)) {
            let bits = src.iter().rev().fold(0u64, |word, b| word << 8 | u64::from(*b));
            dst.copy_from_slice(&self.decode(bits).to_le_bytes()[..width]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(stored_size: usize, signed: bool, wide: bool, scale: f64, offset: f64) -> ScaleOffset {
        ScaleOffset {
            stored_size,
            signed,
            wide,
            scale,
            offset,
        }
    }

    fn decoded32(f: &ScaleOffset, stored: &[u8]) -> Vec<f32> {
        let mut out = vec![0; f.decoded_len(stored.len())];
        f.apply(stored, &mut out);
        out.chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn integers_widen_through_float64() {
        // numcodecs' example: u1 of scale 10, offset 1000, dtype f8.
        let f = filter(1, false, true, 10.0, 1000.0);
        let mut out = vec![0; 24];
        f.apply(&[0, 1, 255], &mut out);
        let got: Vec<f64> = out
            .chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, [1000.0, 1000.1, 1025.5]);
        // Signed integers sign-extend from their width.
        let f = filter(2, true, false, 4.0, -1.5);
        let stored: Vec<u8> = [-3i16, i16::MAX, i16::MIN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(decoded32(&f, &stored), [-2.25, 8190.25, -8193.5]);
        // float32 rounds once, from the float64 result (as numcodecs
        // gives 0.7): 6 / 10 + 0.1 in float32 arithmetic would give
        // 0.70000005.
        let f = filter(4, false, false, 10.0, 0.1);
        assert_eq!(decoded32(&f, &6u32.to_le_bytes()), [0.7]);
        assert_ne!(0.7, 6.0f32 / 10.0 + 0.1f32);
        // 64-bit integers round to the nearest float64 first.
        let f = filter(8, false, true, 1.0, 0.0);
        let mut out = vec![0; 8];
        f.apply(&u64::MAX.to_le_bytes(), &mut out);
        assert_eq!(f64::from_le_bytes(out.try_into().unwrap()), 2f64.powi(64));
    }

    #[test]
    #[should_panic(expected = "scale 0")]
    fn a_zero_scale_is_refused() {
        filter(1, false, true, 0.0, 1.0).apply(&[1], &mut [0; 8]);
    }
}
