//! The element-wise filters a batched read undoes on each decoded chunk, in
//! place, before placing it: the byte order of the `bytes` codec (or of a
//! zarr v2 data type) and numcodecs `delta`. [`ElementFilters::apply`] is the
//! host's implementation; the device's is the kernel of
//! `cuda/kernels/filters.cu`, which does the same, word by word.
//!
//! Elements are read and written byte by byte (little endian), so neither
//! implementation depends on the alignment of a chunk's bytes.

/// The element type whose running sum undoes numcodecs `delta` (`dtype`
/// equal to `astype`): integers wrap, floats add in order from the first
/// element, as `numpy.cumsum` does, with the NaNs of x86's additions
/// (`Float`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaType {
    /// Integers of 1, 2, 4 or 8 bytes, signed or not (wrapping sums are the
    /// same for both).
    Int(usize),
    /// IEEE 754 binary32.
    Float32,
    /// IEEE 754 binary64.
    Float64,
}

impl DeltaType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::Int(size) => size,
            Self::Float32 => 4,
            Self::Float64 => 8,
        }
    }

    /// `a + b` of two elements held in the low bytes of words.
    fn add(self, a: u64, b: u64) -> u64 {
        match self {
            // The element's bytes are the low ones: the carry out is dropped when stored.
            Self::Int(_) => a.wrapping_add(b),
            Self::Float32 => {
                let sum = u64::from((f32::from_bits(a as u32) + f32::from_bits(b as u32)).to_bits());
                Float::BINARY32.nan_of(sum, a, b)
            }
            Self::Float64 => Float::BINARY64.nan_of((f64::from_bits(a) + f64::from_bits(b)).to_bits(), a, b),
        }
    }
}

/// The bits of an IEEE 754 format that decide which NaN a sum is.
///
/// Where a sum is NaN, x86 (whose results zarrs and NumPy return there)
/// gives the NaN operand, quieted (the first where both are), and otherwise
/// (infinities of opposite signs) its default NaN, negative and quiet. GPUs
/// return one canonical NaN instead (`0x7fffffff` in binary32), so both
/// implementations spell the rule out: a chunk whose differences hold NaNs
/// (as those of a zarr edge chunk padded with a NaN fill value do) then
/// decodes to the same bits everywhere.
#[derive(Debug, Clone, Copy)]
struct Float {
    /// The sign bit.
    sign: u64,
    /// The bits of positive infinity: larger magnitudes are NaNs.
    infinity: u64,
    /// The quiet bit of a NaN.
    quiet: u64,
}

impl Float {
    const BINARY32: Self = Self {
        sign: 1 << 31,
        infinity: 0x7f80_0000,
        quiet: 1 << 22,
    };
    const BINARY64: Self = Self {
        sign: 1 << 63,
        infinity: 0x7ff0_0000_0000_0000,
        quiet: 1 << 51,
    };

    fn is_nan(self, bits: u64) -> bool {
        bits & (self.sign - 1) > self.infinity
    }

    /// `sum`, the sum of `a` and `b`, with x86's NaN where it is one.
    fn nan_of(self, sum: u64, a: u64, b: u64) -> u64 {
        if !self.is_nan(sum) {
            sum
        } else if self.is_nan(a) {
            a | self.quiet
        } else if self.is_nan(b) {
            b | self.quiet
        } else {
            self.sign | self.infinity | self.quiet
        }
    }
}

/// What to undo on every decoded chunk, in this order: the byte swap, then
/// the running sum of `delta`. The default undoes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementFilters {
    /// Bytes of each word whose byte order is reversed: the element, or
    /// each half of a complex element, stored big endian; 1 for none.
    pub swap: usize,
    /// The running sum of numcodecs `delta` over the whole chunk, taken after
    /// the byte swap; its elements are `swap` bytes where both apply.
    pub delta: Option<DeltaType>,
}

impl Default for ElementFilters {
    fn default() -> Self {
        Self { swap: 1, delta: None }
    }
}

impl ElementFilters {
    /// Whether the filters change nothing.
    pub fn is_none(&self) -> bool {
        self.swap <= 1 && self.delta.is_none()
    }

    /// Panics unless the filters are ones both implementations undo: words
    /// of 1, 2, 4 or 8 bytes, and delta elements the swapped words.
    pub fn assert_valid(&self) {
        assert!(
            matches!(self.swap, 1 | 2 | 4 | 8),
            "byte swap of {}-byte words",
            self.swap
        );
        if let Some(delta) = self.delta {
            assert!(
                matches!(delta.size(), 1 | 2 | 4 | 8) && (self.swap == 1 || self.swap == delta.size()),
                "delta of {delta:?} after a byte swap of {}-byte words",
                self.swap
            );
        }
    }

    /// Undoes the filters on the decoded chunk `bytes`, in place; trailing
    /// bytes short of a whole word are left as they are.
    pub fn apply(&self, bytes: &mut [u8]) {
        self.assert_valid();
        match self.delta {
            None if self.swap > 1 => bytes.chunks_exact_mut(self.swap).for_each(<[u8]>::reverse),
            None => {}
            Some(delta) => {
                let (width, swapped) = (delta.size(), self.swap > 1);
                let mut sum = None;
                for element in bytes.chunks_exact_mut(width) {
                    if swapped {
                        element.reverse();
                    }
                    let value = load(element);
                    let next = sum.map_or(value, |s| delta.add(s, value));
                    store(element, next);
                    sum = Some(next);
                }
            }
        }
    }
}

/// The little-endian word of `bytes` (at most 8).
fn load(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |word, b| word << 8 | u64::from(*b))
}

/// Stores the low bytes of `word` into `bytes`, little endian.
fn store(bytes: &mut [u8], word: u64) {
    bytes.copy_from_slice(&word.to_le_bytes()[..bytes.len()]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(delta: DeltaType, swap: usize) -> ElementFilters {
        ElementFilters {
            swap,
            delta: Some(delta),
        }
    }

    #[test]
    fn swaps_each_word() {
        let mut bytes: Vec<u8> = (0..10).collect();
        ElementFilters { swap: 4, delta: None }.apply(&mut bytes);
        assert_eq!(bytes, [3, 2, 1, 0, 7, 6, 5, 4, 8, 9]);
        assert!(ElementFilters::default().is_none());
    }

    #[test]
    fn running_sums_wrap_integers() {
        let values: [i16; 4] = [30_000, 10_000, -5, 7];
        let mut bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        delta(DeltaType::Int(2), 1).apply(&mut bytes);
        let sums: Vec<i16> = bytes.chunks(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
        assert_eq!(sums, [30_000, 30_000i16.wrapping_add(10_000), -25_541, -25_534]);
        // Big-endian u64 elements: swapped, then summed.
        let mut bytes: Vec<u8> = [u64::MAX, 2, 5].iter().flat_map(|v| v.to_be_bytes()).collect();
        delta(DeltaType::Int(8), 8).apply(&mut bytes);
        let sums: Vec<u64> = bytes
            .chunks(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(sums, [u64::MAX, 1, 6]);
    }

    #[test]
    fn float_sums_add_in_order_from_the_first_element() {
        let values = [-0.0f32, 1e8, 1.0, 1.0, -1e8];
        let mut bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        delta(DeltaType::Float32, 1).apply(&mut bytes);
        let sums: Vec<f32> = bytes
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let mut expected = vec![values[0]];
        for v in &values[1..] {
            expected.push(expected.last().unwrap() + v);
        }
        // -0.0 stays negative zero (a sum from +0.0 would not).
        assert!(sums[0].is_sign_negative());
        assert_eq!(
            sums.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
            expected.iter().map(|s| s.to_bits()).collect::<Vec<_>>()
        );
        let mut bytes: Vec<u8> = [0.1f64, 0.2, 0.3].iter().flat_map(|v| v.to_be_bytes()).collect();
        delta(DeltaType::Float64, 8).apply(&mut bytes);
        let sums: Vec<f64> = bytes
            .chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(sums, [0.1, 0.1 + 0.2, 0.1 + 0.2 + 0.3]);
    }

    #[test]
    fn nan_sums_are_x86s_nans() {
        let sum = |delta: DeltaType, values: &[u64]| {
            let mut bytes: Vec<u8> = values
                .iter()
                .flat_map(|v| v.to_le_bytes()[..delta.size()].to_vec())
                .collect();
            ElementFilters {
                swap: 1,
                delta: Some(delta),
            }
            .apply(&mut bytes);
            bytes.chunks(delta.size()).map(load).collect::<Vec<u64>>()
        };
        let one = u64::from(1.0f32.to_bits());
        let inf = u64::from(f32::INFINITY.to_bits());
        // A signalling NaN of payload 1 is kept, quieted; a later NaN does
        // not replace it; infinities of opposite signs make the default NaN.
        assert_eq!(
            sum(DeltaType::Float32, &[one, 0x7f80_0001, one, 0xffc0_0002, 0]),
            [one, 0x7fc0_0001, 0x7fc0_0001, 0x7fc0_0001, 0x7fc0_0001]
        );
        assert_eq!(
            sum(DeltaType::Float32, &[inf, inf | 1 << 31, one]),
            [inf, 0xffc0_0000, 0xffc0_0000]
        );
        let inf = f64::INFINITY.to_bits();
        assert_eq!(
            sum(DeltaType::Float64, &[inf, 0xfff0_0000_0000_0005, 2]),
            [inf, 0xfff8_0000_0000_0005, 0xfff8_0000_0000_0005]
        );
        assert_eq!(
            sum(DeltaType::Float64, &[inf | 1 << 63, inf]),
            [inf | 1 << 63, 0xfff8_0000_0000_0000]
        );
    }

    #[test]
    #[should_panic(expected = "byte swap of 3-byte words")]
    fn odd_words_are_refused() {
        ElementFilters { swap: 3, delta: None }.apply(&mut [0; 6]);
    }
}
