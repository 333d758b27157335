//! The wire protocol between the engine and its decoding worker.
//!
//! Little-endian words over the worker's standard input and output. The
//! worker first writes a reply to say it is ready. A request is a `u32`
//! length and then: the operation (`u32`: 1 decompress, 2 decompressed
//! sizes), the device ordinal (`u32`), the batch's chunk count `n` (`u64`),
//! the input and output memory (each a 64-byte IPC handle, a `u64` allocation
//! id, the engine's base address and length as `u64`), seven `u64` offsets
//! into the input memory (pointer, size and output-pointer arrays, output
//! capacities, decoded sizes, statuses) and the largest and total decoded
//! size, then the algorithm's JSON configuration. A reply is a `u32` length,
//! a status byte (0 done, 1 failed) and, on failure, a UTF-8 message.

use std::io::{Read, Write};

use cudarc::driver::sys;

use crate::algorithm::Algorithm;
use crate::cuda::memory::{cuda_err, DeviceBuffer};
use crate::error::{Result, WorkerError};

/// Operation of a request: nvCOMP's decompression.
pub(super) const OP_DECOMPRESS: u32 = 1;
/// Operation of a request: nvCOMP's query of the decompressed sizes.
const OP_SIZES: u32 = 2;

/// A device allocation shared with the worker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shared {
    /// The IPC handle (`CUipcMemHandle`) the worker opens.
    pub(super) handle: [u8; 64],
    /// The allocation's id, unique in the engine's process: the worker keeps
    /// a mapping while the id stays the same.
    pub(super) id: u64,
    /// The allocation's address in the engine's process.
    pub(super) base: u64,
    /// The allocation's length in bytes.
    pub(super) len: u64,
}

impl Shared {
    /// Exports `buffer` (a `cuMemAlloc` allocation) for the worker.
    pub(crate) fn of(buffer: &DeviceBuffer) -> Result<Self> {
        let mut handle = sys::CUipcMemHandle_st { reserved: [0; 64] };
        // SAFETY: `buffer` is a live cuMemAlloc allocation of the current context.
        unsafe { sys::cuIpcGetMemHandle(&mut handle, buffer.ptr()) }
            .result()
            .map_err(cuda_err("cuIpcGetMemHandle"))?;
        Ok(Self {
            handle: handle.reserved.map(|b| b as u8),
            id: buffer.id(),
            base: buffer.ptr(),
            len: buffer.len() as u64,
        })
    }

    const NONE: Self = Self {
        handle: [0; 64],
        id: 0,
        base: 0,
        len: 0,
    };
}

/// Offsets into the input memory of one batched call's arrays (see [`BatchArgs`](crate::cuda::api::BatchArgs)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub in_ptrs: u64,
    pub in_bytes: u64,
    pub out_ptrs: u64,
    pub out_bytes: u64,
    pub actual_bytes: u64,
    pub statuses: u64,
}

/// One call for the worker.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// [`OP_DECOMPRESS`] or the size query.
    pub(super) op: u32,
    /// The device ordinal.
    pub(super) device: u32,
    /// The batch's chunk count.
    pub(super) n: u64,
    /// The engine's input scratch: the table, the inputs, the results.
    pub(super) input: Shared,
    /// The engine's output scratch (none for the size query).
    pub(super) output: Shared,
    pub(super) layout: Layout,
    /// The largest decoded size of a chunk.
    pub(super) max_piece: u64,
    /// The decoded size of the batch.
    pub(super) total_out: u64,
    /// The algorithm's JSON configuration.
    pub(super) algorithm: String,
}

impl Request {
    /// nvCOMP's decompression of `n` chunks, the table in `input`, outputs in `output`.
    pub(crate) fn decompress(
        algorithm: &Algorithm,
        device: usize,
        n: usize,
        (input, output): (Shared, Shared),
        layout: Layout,
        (max_piece, total_out): (usize, usize),
    ) -> Self {
        Self {
            op: OP_DECOMPRESS,
            device: device as u32,
            n: n as u64,
            input,
            output,
            layout,
            max_piece: max_piece as u64,
            total_out: total_out as u64,
            algorithm: algorithm.to_config().to_string(),
        }
    }

    /// nvCOMP's query of the decoded sizes of `n` chunks, written to `layout.actual_bytes`.
    pub(crate) fn sizes(algorithm: &Algorithm, device: usize, n: usize, input: Shared, layout: Layout) -> Self {
        Self {
            op: OP_SIZES,
            output: Shared::NONE,
            ..Self::decompress(algorithm, device, n, (input, Shared::NONE), layout, (0, 0))
        }
    }

    /// The request's bytes on the wire (without the length prefix).
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(256 + self.algorithm.len());
        b.extend(self.op.to_le_bytes());
        b.extend(self.device.to_le_bytes());
        b.extend(self.n.to_le_bytes());
        for s in [&self.input, &self.output] {
            b.extend(s.handle);
            for w in [s.id, s.base, s.len] {
                b.extend(w.to_le_bytes());
            }
        }
        let l = &self.layout;
        for w in [
            l.in_ptrs,
            l.in_bytes,
            l.out_ptrs,
            l.out_bytes,
            l.actual_bytes,
            l.statuses,
            self.max_piece,
            self.total_out,
        ] {
            b.extend(w.to_le_bytes());
        }
        b.extend(self.algorithm.as_bytes());
        b
    }

    /// Reads a request from its bytes on the wire; the error says what is missing.
    pub(super) fn decode(bytes: &[u8]) -> std::result::Result<Self, WorkerError> {
        let mut r = Reader(bytes);
        let (op, device, n) = (r.u32()?, r.u32()?, r.u64()?);
        let mut shared = || -> std::result::Result<Shared, WorkerError> {
            Ok(Shared {
                handle: r.take(64)?.try_into().unwrap(),
                id: r.u64()?,
                base: r.u64()?,
                len: r.u64()?,
            })
        };
        let (input, output) = (shared()?, shared()?);
        let layout = Layout {
            in_ptrs: r.u64()?,
            in_bytes: r.u64()?,
            out_ptrs: r.u64()?,
            out_bytes: r.u64()?,
            actual_bytes: r.u64()?,
            statuses: r.u64()?,
        };
        let (max_piece, total_out) = (r.u64()?, r.u64()?);
        let algorithm = String::from_utf8(r.0.to_vec()).map_err(WorkerError::RequestText)?;
        Ok(Self {
            op,
            device,
            n,
            input,
            output,
            layout,
            max_piece,
            total_out,
            algorithm,
        })
    }
}

/// Reads a request's fields in order.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], WorkerError> {
        if self.0.len() < n {
            return Err(WorkerError::TruncatedRequest);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> std::result::Result<u32, WorkerError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> std::result::Result<u64, WorkerError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

/// Writes one message: its `u32` length, then `payload`.
pub(super) fn write_message(out: &mut impl Write, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(std::io::Error::other)?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(payload)?;
    out.flush()
}

/// Reads one message written by [`write_message`].
pub(super) fn read_message(input: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0; 4];
    input.read_exact(&mut len)?;
    let mut payload = vec![0; u32::from_le_bytes(len) as usize];
    input.read_exact(&mut payload)?;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_survive_their_encoding() {
        let shared = |id| Shared {
            handle: [id as u8; 64],
            id,
            base: 0x7000_0000 + id,
            len: 1 << 20,
        };
        let layout = Layout {
            in_ptrs: 0,
            in_bytes: 8,
            out_ptrs: 16,
            out_bytes: 24,
            actual_bytes: 256,
            statuses: 264,
        };
        let request = Request::decompress(&Algorithm::Zstd, 1, 1, (shared(3), shared(4)), layout, (100, 100));
        let decoded = Request::decode(&request.encode()).unwrap();
        assert_eq!(decoded.encode(), request.encode());
        assert_eq!(decoded.input.id, 3);
        assert_eq!(decoded.output.base, 0x7000_0004);
        assert_eq!(decoded.layout.statuses, 264);
        assert!(Request::decode(&request.encode()[..40]).is_err());
    }
}
