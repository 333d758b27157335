//! [`Encoded`]: what a GPU encode produced, and how each buffer is framed.
//!
//! nvCOMP writes bare compressed chunks into slots of the output scratch;
//! a buffer's bitstream is its framing (written on the host: the LZ4 length
//! header, the gdeflate page table) followed by its chunks' payloads in
//! order. Buffers the GPU does not take carry the CPU's whole encoding.

use std::ops::Range;

use super::staging::results_bytes;
use crate::algorithm::Algorithm;
use crate::format;

/// Bytes of framing in front of a GPU-encoded buffer of `pages` chunks.
fn frame_len(algorithm: &Algorithm, pages: usize) -> usize {
    match algorithm {
        Algorithm::Lz4 { has_header: true, .. } => format::LZ4_HEADER_LEN,
        Algorithm::Gdeflate { has_header: true, .. } => format::GDEFLATE_STATIC_HEADER_LEN + 8 * pages,
        _ => 0,
    }
}

/// The outcome of an encode: where each buffer's compressed chunks are.
pub(super) struct Encoded {
    algorithm: Algorithm,
    lens: Vec<usize>,
    /// Per buffer: (chunk index, compressed size) of its GPU chunks, in order.
    pub(super) payloads: Vec<Vec<(usize, usize)>>,
    /// Per chunk: offset of its slot in the output scratch.
    pub(super) out_offsets: Vec<usize>,
    /// Bytes of results before the output data in the pinned output buffer.
    results_len: usize,
    /// Per buffer: the CPU's encoding, for buffers the GPU did not take.
    cpu_encoded: Vec<Option<Vec<u8>>>,
    /// Per buffer: its encoded size.
    pub(super) sizes: Vec<usize>,
}

impl Encoded {
    /// The outcome of encoding buffers of `lens` bytes: the GPU compressed
    /// `chunks` (buffer, byte range) to `comp_sizes` bytes in the slots at
    /// `out_offsets`, the CPU the buffers of `cpu_encoded`.
    pub(super) fn new(
        algorithm: &Algorithm,
        lens: Vec<usize>,
        chunks: &[(usize, Range<usize>)],
        comp_sizes: &[usize],
        out_offsets: Vec<usize>,
        cpu_encoded: Vec<Option<Vec<u8>>>,
    ) -> Self {
        let count = lens.len();
        let n = chunks.len();
        let mut payloads: Vec<Vec<(usize, usize)>> = vec![Vec::new(); count];
        for (k, (i, _)) in chunks.iter().enumerate() {
            payloads[*i].push((k, comp_sizes[k]));
        }
        let sizes = (0..count)
            .map(|i| match &cpu_encoded[i] {
                Some(bytes) => bytes.len(),
                None => frame_len(algorithm, payloads[i].len()) + payloads[i].iter().map(|p| p.1).sum::<usize>(),
            })
            .collect();
        Self {
            algorithm: *algorithm,
            lens,
            payloads,
            out_offsets,
            results_len: if n > 0 { results_bytes(n) } else { 0 },
            cpu_encoded,
            sizes,
        }
    }

    /// The bytes written on the host in front of buffer `i`'s GPU payloads:
    /// its header, or all of it when the CPU encoded it.
    pub(super) fn frame(&self, i: usize) -> Vec<u8> {
        if let Some(bytes) = &self.cpu_encoded[i] {
            return bytes.clone();
        }
        match self.algorithm {
            Algorithm::Lz4 { has_header: true, .. } => format::lz4_header(self.lens[i])
                .expect("GPU LZ4 chunks are below 16 MiB")
                .to_vec(),
            Algorithm::Gdeflate { has_header: true, .. } => {
                let mut header = Vec::with_capacity(frame_len(&self.algorithm, self.payloads[i].len()));
                header.extend_from_slice(&(self.lens[i] as u64).to_le_bytes());
                header.extend_from_slice(&(self.payloads[i].len() as u64).to_le_bytes());
                for (_, size) in &self.payloads[i] {
                    header.extend_from_slice(&(*size as u64).to_le_bytes());
                }
                header
            }
            _ => Vec::new(),
        }
    }

    /// Writes buffer `i` into `out`, from the pinned output buffer `pinned`.
    pub(super) fn write(&self, i: usize, pinned: &[u8], out: &mut [u8]) {
        let frame = self.frame(i);
        out[..frame.len()].copy_from_slice(&frame);
        let mut at = frame.len();
        for &(k, size) in &self.payloads[i] {
            let src = self.results_len + self.out_offsets[k];
            out[at..at + size].copy_from_slice(&pinned[src..src + size]);
            at += size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_chunks_follow_their_gdeflate_page_table_and_cpu_buffers_stand_alone() {
        let algorithm = Algorithm::Gdeflate {
            algorithm: 0,
            has_header: true,
        };
        // Buffer 0: two GPU pages; buffer 1: encoded on the CPU.
        let chunks = [(0, 0..65536), (0, 65536..70000)];
        let encoded = Encoded::new(
            &algorithm,
            vec![70000, 3],
            &chunks,
            &[4, 2],
            vec![0, 256],
            vec![None, Some(vec![9, 9, 9])],
        );
        let header_len = format::GDEFLATE_STATIC_HEADER_LEN + 16;
        assert_eq!(encoded.sizes, [header_len + 6, 3]);
        let frame = encoded.frame(0);
        let words: Vec<u64> = frame
            .chunks(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        assert_eq!(words, [70000, 2, 4, 2]);
        assert_eq!(encoded.frame(1), [9, 9, 9]);
        // The pinned output buffer: results first, then the slots.
        let results = results_bytes(2);
        let mut pinned = vec![0u8; results + 258];
        pinned[results..results + 4].copy_from_slice(&[1, 2, 3, 4]);
        pinned[results + 256..results + 258].copy_from_slice(&[5, 6]);
        let mut out = vec![0u8; encoded.sizes[0]];
        encoded.write(0, &pinned, &mut out);
        assert_eq!(&out[..header_len], frame.as_slice());
        assert_eq!(&out[header_len..], [1, 2, 3, 4, 5, 6]);
    }
}
