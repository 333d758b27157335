//! The CPU backend: the same bitstreams as nvCOMP, written and read with CPU
//! libraries, in parallel over the buffers of a batch (rayon).

use crate::algorithm::Algorithm;
use crate::batch::Batch;
use crate::error::Result;

/// Compresses every buffer of `inputs`.
pub fn encode_batch(algorithm: &Algorithm, inputs: &[&[u8]]) -> Result<Batch> {
    let _ = (algorithm, inputs);
    todo!("CPU backend")
}

/// Compresses one buffer (`index` names it in errors).
pub fn encode_one(algorithm: &Algorithm, input: &[u8], index: usize) -> Result<Vec<u8>> {
    let _ = (algorithm, input, index);
    todo!("CPU backend")
}

/// Decompresses every buffer of `inputs`; declared sizes above `max_decoded_size` are errors.
pub fn decode_batch(algorithm: &Algorithm, inputs: &[&[u8]], max_decoded_size: u64) -> Result<Batch> {
    let _ = (algorithm, inputs, max_decoded_size);
    todo!("CPU backend")
}

/// Decompresses `inputs[i]` into `outputs[i]`, which must be exactly the decoded size.
pub fn decode_batch_into(
    algorithm: &Algorithm,
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    max_decoded_size: u64,
) -> Result<()> {
    let _ = (algorithm, inputs, outputs, max_decoded_size);
    todo!("CPU backend")
}
