//! Property tests of the CPU backend: random batches round-trip for every
//! algorithm and option, and arbitrary bytes never make a decoder panic.

use crate::common;

use common::{cpu_algorithms, max_input};
use proptest::prelude::*;
use zarrs_nvcomp::{Backend, BatchCodec};

/// A buffer of 0..200 KiB: random bytes, or a short random pattern repeated.
fn buffer() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200 * 1024),
        (prop::collection::vec(any::<u8>(), 1..16), 0..200 * 1024usize).prop_map(|(pattern, n)| pattern
            .iter()
            .copied()
            .cycle()
            .take(n)
            .collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_batches_round_trip(batch in prop::collection::vec(buffer(), 0..6)) {
        for alg in cpu_algorithms() {
            let codec = BatchCodec::new(alg, Backend::Cpu).unwrap();
            let inputs: Vec<&[u8]> = batch.iter().map(|b| &b[..b.len().min(max_input(&alg))]).collect();
            let encoded = codec.encode_batch(&inputs).unwrap();
            let decoded = codec.decode_batch(&encoded.iter().collect::<Vec<_>>()).unwrap();
            prop_assert_eq!(decoded.len(), inputs.len());
            for (i, input) in inputs.iter().enumerate() {
                prop_assert!(decoded.get(i) == *input, "{:?} buffer {}", alg, i);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(buffers in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..600), 1..4)) {
        for alg in cpu_algorithms() {
            let codec = BatchCodec::new(alg, Backend::Cpu).unwrap().with_max_decoded_size(1 << 20);
            // Ok or Err, both fine: only a panic fails.
            let _ = codec.decode_batch(&buffers);
            let mut outs: Vec<Vec<u8>> = buffers.iter().map(|b| vec![0; b.len() * 2]).collect();
            let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
            let _ = codec.decode_batch_into(&buffers, &mut refs);
        }
    }

    #[test]
    fn mutated_valid_buffers_never_panic(data in prop::collection::vec(any::<u8>(), 0..5000), at in any::<usize>(), byte in any::<u8>()) {
        for alg in cpu_algorithms() {
            let codec = BatchCodec::new(alg, Backend::Cpu).unwrap().with_max_decoded_size(1 << 20);
            let mut enc = codec.encode_batch(&[&data]).unwrap().get(0).to_vec();
            if !enc.is_empty() {
                let i = at % enc.len();
                enc[i] ^= byte | 1;
            }
            let _ = codec.decode_batch(&[&enc]);
        }
    }
}
