//! Finite State Entropy tables and backward bit streams (RFC 8878, 4.1), as
//! Zstandard's Huffman weights and sequences use them.
//!
//! ```text
//! table description: 4 bits accuracy log - 5, then one variable-width
//!                    count per symbol (value - 1; -1 means "less than
//!                    one"), each zero count followed by 2-bit repeat
//!                    flags of further zeros (3: more flags follow);
//!                    read from the least significant bit of byte 0
//! backward stream:   read from its last byte towards its first, most
//!                    significant bit first, below the highest set bit of
//!                    the last byte (the end mark, so that byte is never 0)
//! ```
//!
//! [`read_counts`] rejects exactly the descriptions libzstd's
//! `FSE_readNCount` rejects; [`decoding_table`] spreads the states as
//! libzstd's decoders do.

/// Evaluates `$body` (calls of `#[inline(always)]` functions) compiled for
/// BMI2 where the CPU has it: decoding a bit stream is a chain of variable
/// shifts, one instruction each with BMI2 and three without, and the wheel
/// is built for any x86-64.
macro_rules! with_fast_shifts {
    ($body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "bmi2")]
            fn bmi2<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            if std::arch::is_x86_feature_detected!("bmi2") {
                // SAFETY: the CPU has BMI2, as just checked.
                return unsafe { bmi2(|| $body) };
            }
        }
        $body
    }};
}
pub(crate) use with_fast_shifts;

/// Smallest accuracy log of a table description.
const MIN_ACCURACY_LOG: u32 = 5;

/// Reads a table description: the accuracy log, the normalised count of
/// each symbol up to the last one it declares (-1: "less than one"), and
/// the bytes read. Symbols above `max_symbol` and accuracy logs above
/// `max_log` are errors, as are descriptions that do not sum to the table
/// size or run past `bytes`.
pub(crate) fn read_counts(bytes: &[u8], max_symbol: usize, max_log: u32) -> Result<(u32, Vec<i16>, usize), String> {
    let mut bits = ForwardBits { bytes, at: 0 };
    let log = bits.read(4) + MIN_ACCURACY_LOG;
    if log > max_log {
        return Err(format!("FSE accuracy log {log} is above {max_log}"));
    }
    let mut remaining = (1i32 << log) + 1;
    let mut threshold = 1i32 << log;
    let mut width = log + 1;
    let mut counts: Vec<i16> = Vec::with_capacity(max_symbol + 1);
    let mut after_zero = false;
    let too_many = || format!("FSE table description declares symbols past {max_symbol}");
    while remaining > 1 {
        if after_zero {
            loop {
                let repeat = bits.read(2) as usize;
                counts.extend(std::iter::repeat_n(0, repeat));
                if counts.len() > max_symbol {
                    return Err(too_many());
                }
                if repeat != 3 {
                    break;
                }
            }
        }
        let max = 2 * threshold - 1 - remaining;
        let low = bits.peek(width - 1) as i32 & (threshold - 1);
        let value = if low < max {
            bits.at += width as usize - 1;
            low
        } else {
            let mut v = bits.peek(width) as i32 & (2 * threshold - 1);
            bits.at += width as usize;
            if v >= threshold {
                v -= max;
            }
            v
        };
        let count = value - 1;
        remaining -= count.abs();
        counts.push(count as i16);
        after_zero = count == 0;
        if remaining > 1 && counts.len() > max_symbol {
            return Err(too_many());
        }
        while remaining < threshold && width > 1 {
            width -= 1;
            threshold >>= 1;
        }
    }
    let used = bits.at.div_ceil(8);
    if remaining != 1 || used > bytes.len() {
        return Err("bad FSE table description".into());
    }
    Ok((log, counts, used))
}

/// One state of an FSE decoding table: its symbol, the bits its next state
/// reads, and the base those bits are added to.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct State {
    pub(crate) symbol: u8,
    pub(crate) bits: u8,
    pub(crate) base: u16,
}

/// The decoding table of `counts` (RFC 8878, 4.1.1, "FSE decoding table"):
/// "less than one" symbols at the top, the others spread by the standard
/// step.
pub(crate) fn decoding_table(log: u32, counts: &[i16]) -> Result<Vec<State>, String> {
    let size = 1usize << log;
    let mask = size - 1;
    let mut symbols = vec![0u8; size];
    let mut next = vec![0u32; counts.len()];
    let mut high = size;
    for (s, &c) in counts.iter().enumerate() {
        if c == -1 {
            high -= 1;
            symbols[high] = s as u8;
            next[s] = 1;
        } else {
            next[s] = c as u32;
        }
    }
    let step = (size >> 1) + (size >> 3) + 3;
    let mut at = 0;
    for (s, &c) in counts.iter().enumerate() {
        for _ in 0..c.max(0) {
            symbols[at] = s as u8;
            at = (at + step) & mask;
            while at >= high {
                at = (at + step) & mask;
            }
        }
    }
    if at != 0 {
        return Err("FSE table does not fill its states".into());
    }
    Ok(symbols
        .iter()
        .map(|&symbol| {
            let n = next[usize::from(symbol)];
            next[usize::from(symbol)] += 1;
            let bits = log - (31 - n.leading_zeros());
            State {
                symbol,
                bits: bits as u8,
                base: ((n << bits) - size as u32) as u16,
            }
        })
        .collect())
}

/// Bits read from the start of `bytes`, least significant first; zeros past
/// the end (the caller checks how far it read).
struct ForwardBits<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl ForwardBits<'_> {
    fn peek(&self, n: u32) -> u32 {
        let byte = self.at / 8;
        let mut word = [0u8; 8];
        let avail = self.bytes.len().saturating_sub(byte).min(8);
        word[..avail].copy_from_slice(&self.bytes[byte.min(self.bytes.len())..byte.min(self.bytes.len()) + avail]);
        let v = u64::from_le_bytes(word) >> (self.at % 8);
        (v & ((1u64 << n) - 1)) as u32
    }

    fn read(&mut self, n: u32) -> u32 {
        let v = self.peek(n);
        self.at += n as usize;
        v
    }
}

/// A backward bit stream, read through a 64-bit container as libzstd's
/// `BIT_DStream` reads it: `container` holds the 8 bytes from `base` (bytes
/// before the stream's start read as zeros), of which the top `consumed`
/// bits are read. Decoders check [`Self::overran`] once at the end, as an
/// overrun can only end in an error.
///
/// [`Self::peek`] sees only the container: callers [`Self::refill`] before
/// each group of reads of at most 56 bits. Past the stream's start the
/// values read are arbitrary, which only an overrun, refused, reads.
pub(crate) struct BackwardBits<'a> {
    bytes: &'a [u8],
    base: isize,
    container: u64,
    consumed: u32,
}

impl<'a> BackwardBits<'a> {
    /// The stream of `bytes`, below the end mark of its last byte.
    pub(crate) fn new(bytes: &'a [u8]) -> Result<Self, &'static str> {
        let &last = bytes.last().ok_or("empty bit stream")?;
        if last == 0 {
            return Err("bit stream has no end mark");
        }
        let base = bytes.len() as isize - 8;
        Ok(Self {
            bytes,
            base,
            container: Self::load(bytes, base),
            consumed: last.leading_zeros() + 1,
        })
    }

    /// The 8 bytes from `base` as a little-endian word, zeros before the start.
    fn load(bytes: &[u8], base: isize) -> u64 {
        if base >= 0 {
            let at = base as usize;
            u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
        } else {
            let mut word = [0u8; 8];
            word[(-base) as usize..].copy_from_slice(bytes);
            u64::from_le_bytes(word)
        }
    }

    /// Moves the container down the stream so that at least 57 bits (or all
    /// that are left) are in it.
    #[inline(always)]
    pub(crate) fn refill(&mut self) {
        if self.base > 0 && self.consumed >= 8 {
            let step = (self.consumed as isize / 8).min(self.base);
            self.base -= step;
            self.consumed -= 8 * step as u32;
            self.container = Self::load(self.bytes, self.base);
        }
    }

    /// The next `n` bits (1 to 56) without reading them.
    #[inline(always)]
    pub(crate) fn peek(&self, n: u32) -> u64 {
        debug_assert!((1..=56).contains(&n));
        // Past the start the shift wraps and the bits are not zeros; only an
        // overrun reads there, and the stream is refused for it.
        self.container.wrapping_shl(self.consumed) >> (64 - n)
    }

    /// Reads `n` bits (0 to 56).
    #[inline(always)]
    pub(crate) fn read(&mut self, n: u32) -> u64 {
        if n == 0 {
            return 0;
        }
        let v = self.peek(n);
        self.consumed += n;
        v
    }

    /// Skips `n` bits.
    #[inline(always)]
    pub(crate) fn skip(&mut self, n: u32) {
        self.consumed += n;
    }

    /// Skips `count` codes (a multiple of 4) in each of four streams, the
    /// length of each code being what `lengths` gives for its 12-bit
    /// lookahead. The streams advance in step, as four independent chains,
    /// with only their containers and positions in registers.
    pub(crate) fn skip_codes4(streams: &mut [Self; 4], count: usize, lengths: &[u8; 4096]) {
        with_fast_shifts!(Self::skip_codes4_body(streams, count, lengths));
    }

    #[inline(always)]
    fn skip_codes4_body(streams: &mut [Self; 4], count: usize, lengths: &[u8; 4096]) {
        debug_assert!(count.is_multiple_of(4));
        for _ in 0..count / 4 {
            let mut containers = [0u64; 4];
            let mut consumed = [0u32; 4];
            for (i, bits) in streams.iter_mut().enumerate() {
                bits.refill();
                containers[i] = bits.container;
                consumed[i] = bits.consumed;
            }
            // Four codes of at most 12 bits fit the 57 bits a refill leaves.
            for _ in 0..4 {
                for i in 0..4 {
                    let v = (containers[i].wrapping_shl(consumed[i]) >> 52) as usize;
                    consumed[i] += u32::from(lengths[v]);
                }
            }
            for (bits, consumed) in streams.iter_mut().zip(consumed) {
                bits.consumed = consumed;
            }
        }
    }

    /// Bits not read yet; negative past the start.
    fn left(&self) -> isize {
        8 * self.base + 64 - self.consumed as isize
    }

    /// Whether every bit was read, and no more.
    pub(crate) fn is_done(&self) -> bool {
        self.left() == 0
    }

    /// Whether more bits were read than the stream holds.
    pub(crate) fn overran(&self) -> bool {
        self.left() < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backward_bits_read_from_the_end_mark_down_with_zeros_past_the_start() {
        // 0b0000_0101 0b1011_0011: end mark is bit 7 of the last byte.
        let bytes = [0b1010_0101u8, 0b0000_0000, 0b1011_0011];
        let mut bits = BackwardBits::new(&bytes).unwrap();
        assert_eq!(bits.left(), 23);
        assert_eq!(bits.read(3), 0b011);
        assert_eq!(bits.read(4), 0b0011);
        assert_eq!(bits.read(8), 0);
        assert_eq!(bits.read(5), 0b10100);
        assert!(!bits.is_done());
        assert_eq!(bits.read(3), 0b101);
        assert!(bits.is_done());
        assert_eq!(bits.read(2), 0);
        assert!(bits.overran());
        assert!(BackwardBits::new(&[1, 0]).is_err());
        assert!(BackwardBits::new(&[]).is_err());
        // Long streams read the same through the word path.
        let long: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) | 1).collect();
        let mut fast = BackwardBits::new(&long).unwrap();
        let mut slow_left = fast.left();
        while fast.left() > 0 {
            fast.refill();
            let n = (fast.left().min(13)) as u32;
            let got = fast.read(n);
            let want = (0..n).fold(0u64, |v, _| {
                slow_left -= 1;
                let p = slow_left as usize;
                v << 1 | u64::from((long[p / 8] >> (p % 8)) & 1)
            });
            assert_eq!(got, want);
        }
        assert!(fast.is_done());
    }

    #[test]
    fn predefined_distributions_fill_their_tables() {
        // RFC 8878's predefined literal length distribution (accuracy log 6).
        let ll: [i16; 36] = [
            4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1,
            -1,
        ];
        let table = decoding_table(6, &ll).unwrap();
        assert_eq!(table.len(), 64);
        // RFC 8878, Appendix A: state 0 is symbol 0, reading 4 bits from
        // base 0; the "less than one" symbols 32-35 take the top states.
        assert_eq!((table[0].symbol, table[0].bits, table[0].base), (0, 4, 0));
        assert_eq!((table[63].symbol, table[63].bits), (32, 6));
        assert_eq!((table[60].symbol, table[60].bits), (35, 6));
    }
}
