//! The Huffman tree description that starts the compressed literals of a
//! Zstandard block (RFC 8878, 3.1.1.3.1 and 4.2.1), checked as libzstd's
//! `HUF_readStats` checks it.
//!
//! ```text
//! literals header:  byte 0 bits 1-0 type (0 raw, 1 RLE, 2 compressed, 3 treeless),
//!                   bits 3-2 size format; compressed: 3, 3, 4 or 5 header bytes
//!                   for size formats 0 to 3, the compressed size in the top bits
//! tree description: header byte h; h >= 128: h - 127 weights, 4 bits each;
//!                   h < 128: h bytes of FSE-coded weights (an FSE table
//!                   description of accuracy log <= 6, then a backward bit
//!                   stream read by two interleaved states)
//! ```
//!
//! The weights must describe a complete prefix code: sum of 2^(w-1) over the
//! weights, completed by an implied last weight, a power of two of at most
//! 2^12, and an even number (at least 2) of weight-1 symbols. Only a tree
//! that libzstd also rejects is an error: nvCOMP's Zstandard decoder does
//! not check it.

/// Most weights a description holds (the last symbol's is implied).
const MAX_WEIGHTS: usize = 255;
/// Largest weight, and largest table log, of a literals Huffman code.
const MAX_TABLE_LOG: u32 = 12;
/// Largest FSE accuracy log of the weights' table.
const MAX_WEIGHTS_ACCURACY_LOG: u32 = 6;

/// Checks the Huffman tree description of a compressed block's literals;
/// `block` is the block's body. Blocks whose literals are raw, RLE or
/// treeless have none.
pub(crate) fn check_tree(block: &[u8]) -> Result<(), String> {
    let bad = |why: &str| format!("bad Huffman tree description of the literals: {why}");
    let Some(&first) = block.first() else {
        return Err(bad("empty block"));
    };
    if first & 3 != 2 {
        return Ok(());
    }
    let header_len = [3, 3, 4, 5][usize::from((first >> 2) & 3)];
    let header = block
        .get(..header_len)
        .ok_or_else(|| bad("literals header truncated"))?;
    let word = header.iter().rev().fold(0u64, |w, &b| w << 8 | u64::from(b));
    let size_bits = [10, 10, 14, 18][usize::from((first >> 2) & 3)];
    let compressed = (word >> (4 + size_bits)) as usize & ((1 << size_bits) - 1);
    let literals = block
        .get(header_len..header_len + compressed)
        .ok_or_else(|| bad("literals run past the block"))?;
    let weights = weights(literals).map_err(|why| bad(&why))?;
    check_weights(&weights).map_err(|why| bad(&why))
}

/// The weights a tree description at the start of `literals` declares.
fn weights(literals: &[u8]) -> Result<Vec<u8>, String> {
    let &head = literals.first().ok_or("no tree description")?;
    if head >= 128 {
        let n = usize::from(head) - 127;
        let packed = literals.get(1..1 + n.div_ceil(2)).ok_or("direct weights truncated")?;
        return Ok((0..n)
            .map(|i| (packed[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 15)
            .collect());
    }
    let coded = literals
        .get(1..1 + usize::from(head))
        .ok_or("coded weights truncated")?;
    let (log, counts, used) = read_counts(coded)?;
    let table = decoding_table(log, &counts)?;
    decode_weights(&coded[used..], log, &table)
}

/// Reads an FSE table description (RFC 8878, 4.1.1): the accuracy log, the
/// normalised count of each symbol (-1: "less than one"), and the bytes read.
fn read_counts(bytes: &[u8]) -> Result<(u32, Vec<i32>, usize), String> {
    let mut bits = ForwardBits { bytes, at: 0 };
    let log = bits.read(4) + 5;
    if log > MAX_WEIGHTS_ACCURACY_LOG {
        return Err(format!("weights' accuracy log {log} is above 6"));
    }
    let mut remaining = (1i32 << log) + 1;
    let mut threshold = 1i32 << log;
    let mut width = log + 1;
    let mut counts = Vec::new();
    let mut after_zero = false;
    while remaining > 1 {
        if after_zero {
            // Repeat flags: 2 bits each, the number of further zeros; 3 means more follow.
            loop {
                let repeat = bits.read(2);
                counts.extend(std::iter::repeat_n(0, repeat as usize));
                if repeat != 3 || counts.len() > MAX_WEIGHTS {
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
        counts.push(count);
        after_zero = count == 0;
        if counts.len() > MAX_WEIGHTS + 1 {
            return Err("weights' table has too many symbols".into());
        }
        while remaining < threshold && width > 1 {
            width -= 1;
            threshold >>= 1;
        }
    }
    let used = bits.at.div_ceil(8);
    if remaining != 1 || used > bytes.len() {
        return Err("bad weights' table description".into());
    }
    Ok((log, counts, used))
}

/// One state of an FSE decoding table: its symbol, the bits its next state
/// reads, and the base those bits are added to.
#[derive(Debug, Clone, Copy)]
struct State {
    symbol: u8,
    bits: u32,
    base: u32,
}

/// The FSE decoding table of `counts` (RFC 8878, 4.1.1, "FSE decoding table").
fn decoding_table(log: u32, counts: &[i32]) -> Result<Vec<State>, String> {
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
        return Err("weights' table does not fill its states".into());
    }
    Ok(symbols
        .iter()
        .map(|&symbol| {
            let n = next[usize::from(symbol)];
            next[usize::from(symbol)] += 1;
            let bits = log - (31 - n.leading_zeros());
            State {
                symbol,
                bits,
                base: (n << bits) - size as u32,
            }
        })
        .collect())
}

/// Decodes the weights of the backward bit stream `stream` with two
/// interleaved states, as libzstd does: until a state update reads past the
/// stream's start, then the other state's symbol last.
fn decode_weights(stream: &[u8], log: u32, table: &[State]) -> Result<Vec<u8>, String> {
    let &last = stream.last().ok_or("no weights' bit stream")?;
    if last == 0 {
        return Err("weights' bit stream has no end mark".into());
    }
    let mut bits = BackwardBits {
        bytes: stream,
        left: 8 * (stream.len() - 1) + (7 - last.leading_zeros() as usize),
        overflowed: false,
    };
    let mut states = [bits.read(log) as usize, bits.read(log) as usize];
    let mut weights = Vec::new();
    let mut k = 0;
    loop {
        let state = table[states[k]];
        weights.push(state.symbol);
        states[k] = (state.base + bits.read(state.bits)) as usize;
        if bits.overflowed {
            weights.push(table[states[1 - k]].symbol);
            break;
        }
        if weights.len() > MAX_WEIGHTS {
            return Err("more than 255 weights".into());
        }
        k = 1 - k;
    }
    if weights.len() > MAX_WEIGHTS {
        return Err("more than 255 weights".into());
    }
    Ok(weights)
}

/// libzstd's checks of the weights (`HUF_readStats`).
fn check_weights(weights: &[u8]) -> Result<(), String> {
    let mut ones = 0u32;
    let mut total = 0u32;
    for &w in weights {
        if u32::from(w) > MAX_TABLE_LOG {
            return Err(format!("weight {w} is above 12"));
        }
        ones += u32::from(w == 1);
        total += (1 << w) >> 1;
    }
    if total == 0 {
        return Err("all weights are zero".into());
    }
    let log = 32 - total.leading_zeros();
    if log > MAX_TABLE_LOG {
        return Err(format!("table log {log} is above 12"));
    }
    let rest = (1 << log) - total;
    if !rest.is_power_of_two() {
        return Err("the weights leave no power of two for the last symbol".into());
    }
    ones += u32::from(rest == 1);
    if ones < 2 || ones % 2 == 1 {
        return Err("an odd number of weight-1 symbols".into());
    }
    Ok(())
}

/// Bits read from the start of `bytes`, least significant first; zeros past
/// the end (the caller checks how far it read).
struct ForwardBits<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl ForwardBits<'_> {
    fn peek(&self, n: u32) -> u32 {
        (0..n as usize).fold(0, |v, i| {
            let p = self.at + i;
            let bit = self.bytes.get(p / 8).map_or(0, |b| (b >> (p % 8)) & 1);
            v | u32::from(bit) << i
        })
    }

    fn read(&mut self, n: u32) -> u32 {
        let v = self.peek(n);
        self.at += n as usize;
        v
    }
}

/// Bits read from the end of `bytes` towards its start, most significant
/// first, below the end mark; zeros past the start, which sets `overflowed`.
struct BackwardBits<'a> {
    bytes: &'a [u8],
    /// Bits not read yet.
    left: usize,
    overflowed: bool,
}

impl BackwardBits<'_> {
    fn read(&mut self, n: u32) -> u32 {
        let mut v = 0;
        for _ in 0..n {
            let bit = match self.left.checked_sub(1) {
                Some(p) => {
                    self.left = p;
                    (self.bytes[p / 8] >> (p % 8)) & 1
                }
                None => {
                    self.overflowed = true;
                    0
                }
            };
            v = v << 1 | u32::from(bit);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::zstd::check_literal_trees;

    /// Bytes of several kinds: float32 walks, text-like bytes, noise, runs.
    fn samples(len: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
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

    #[test]
    fn trees_libzstd_writes_pass() {
        for (s, len) in [0usize, 1, 100, 1000, 5000, 70_000, 300_000, 1 << 20]
            .into_iter()
            .enumerate()
        {
            for data in samples(len, s as u64) {
                for level in [-5, -1, 1, 2, 3, 5, 9, 12, 19, 22] {
                    let frame = zstd::bulk::compress(&data, level).unwrap();
                    assert_eq!(check_literal_trees(&frame), Ok(()), "{len} bytes, level {level}");
                }
            }
        }
    }

    #[test]
    fn only_trees_libzstd_rejects_are_rejected() {
        // Bit flips over the headers and the tree of frames of each kind.
        let mut rejected = 0;
        for (s, data) in samples(20_000, 5).into_iter().enumerate() {
            let frame = zstd::bulk::compress(&data, 3).unwrap();
            for at in 5..frame.len().min(140) {
                for bit in 0..8 {
                    let mut bad = frame.clone();
                    bad[at] ^= 1 << bit;
                    if check_literal_trees(&bad).is_err() {
                        rejected += 1;
                        let decoded = zstd::bulk::decompress(&bad, 1 << 20);
                        assert!(decoded.is_err(), "sample {s}: byte {at} bit {bit} is valid to libzstd");
                    }
                }
            }
        }
        assert!(rejected > 50, "only {rejected} rejected");
    }

    #[test]
    fn the_corpus_tree_libzstd_rejects_is_rejected() {
        let cases = super::super::gpu_corpus("zstd");
        assert!(!cases.is_empty());
        let mut rejected = Vec::new();
        for (name, batch, valid) in &cases {
            for frame in valid {
                assert_eq!(check_literal_trees(frame), Ok(()), "{name}");
            }
            for (i, frame) in batch.iter().enumerate() {
                let err = check_literal_trees(frame).err();
                // Only streams libzstd rejects are rejected.
                if err.is_some() {
                    assert!(zstd::bulk::decompress(frame, 1 << 20).is_err(), "{name}, buffer {i}");
                    rejected.push(name.as_str());
                }
            }
        }
        assert!(rejected.contains(&"zstd-bitflip-9c0f9a540e7c.json"), "{rejected:?}");
    }
}
