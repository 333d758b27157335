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
/// element, as `numpy.cumsum` does.
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
            Self::Float32 => u64::from((f32::from_bits(a as u32) + f32::from_bits(b as u32)).to_bits()),
            Self::Float64 => (f64::from_bits(a) + f64::from_bits(b)).to_bits(),
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
    #[should_panic(expected = "byte swap of 3-byte words")]
    fn odd_words_are_refused() {
        ElementFilters { swap: 3, delta: None }.apply(&mut [0; 6]);
    }
}
