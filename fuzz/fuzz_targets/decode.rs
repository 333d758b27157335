//! Feeds arbitrary bytes to the CPU decoder: the first byte picks the
//! algorithm and options, the rest is split into a batch of up to 4 buffers
//! (at the second byte's cut points). Any result is fine; a panic, abort or
//! out-of-bounds access is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zarrs_nvcomp::{Algorithm, Backend, BatchCodec, DataType};

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else { return };
    let algorithm = match choice % 8 {
        0 => Algorithm::Lz4 { data_type: DataType::Char, has_header: true },
        1 => Algorithm::Lz4 { data_type: DataType::Char, has_header: false },
        2 => Algorithm::Snappy,
        3 => Algorithm::Zstd,
        4 => Algorithm::Deflate { algorithm: 0 },
        5 => Algorithm::Gzip { algorithm: 0 },
        6 => Algorithm::Gdeflate { algorithm: 0, has_header: true },
        _ => Algorithm::Gdeflate { algorithm: 0, has_header: false },
    };
    let codec = BatchCodec::new(algorithm, Backend::Cpu).unwrap().with_max_decoded_size(16 << 20);
    let parts = 1 + (choice as usize / 8) % 4;
    let step = rest.len() / parts + 1;
    let inputs: Vec<&[u8]> = rest.chunks(step).collect();
    let _ = codec.decode_batch(&inputs);
    let mut outs: Vec<Vec<u8>> = inputs.iter().map(|b| vec![0; b.len() * 3]).collect();
    let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    let _ = codec.decode_batch_into(&inputs, &mut refs);
});
