//! Where a read writes: memory of its own, returned as
//! [`ArrayData`](super::ArrayData), or memory the caller lends for the call
//! ([`ReadInto`], read by [`read_chunks_parallel_into`](super::read_chunks_parallel_into)).
//!
//! Lent memory outlives nothing of the read: waves are decoded on the
//! blocking pool, and a read that is dropped half-way (cancelled, or its
//! caller interrupted) leaves a decoding task running. A [`Lease`] stops
//! that task from writing once the borrow ends: every wave is decoded while
//! the lease is held ([`Leased`]), and the read ends the lease when it ends,
//! waiting for a wave in progress.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::device::DeviceOutput;
use super::fetch::ArenaSource;
use super::host::HostOutput;
use super::wave::WaveDecoder;
use crate::array::error::ReadError;
use crate::array::wave_item::WaveItem;
use crate::codec::Backend;
use crate::cuda::{CudaEngine, DeviceRegion};

/// Memory a caller lends a read for its duration: exactly the selection's
/// bytes, written in C order, native byte order. Every byte is written:
/// missing chunks as the fill value, whatever the memory held before.
#[derive(Debug)]
pub enum ReadInto<'a> {
    /// Host memory; the read decodes on the CPU ([`ReadOptions::device`](super::ReadOptions::device)
    /// [`Backend::Auto`] or [`Backend::Cpu`]).
    Host(&'a mut [u8]),
    /// Device memory of the device the read decodes on
    /// ([`Backend::Auto`]: device 0, or [`Backend::Cuda`]).
    Device(LentDevice<'a>),
}

/// Device memory lent to a read, as a borrow of `'a`.
#[derive(Debug)]
pub struct LentDevice<'a> {
    region: DeviceRegion,
    _lent: PhantomData<&'a mut [u8]>,
}

impl LentDevice<'_> {
    /// The device memory `region`.
    ///
    /// # Safety
    /// `region` must be writable device memory that stays allocated for
    /// `'a`, and that nothing else reads or writes until the read it is lent
    /// to returns (or is dropped).
    pub unsafe fn new(region: DeviceRegion) -> Self {
        Self {
            region,
            _lent: PhantomData,
        }
    }

    /// The memory's address and length.
    pub fn region(&self) -> DeviceRegion {
        self.region
    }
}

/// Where a read writes.
pub(super) enum Target {
    /// New memory of the read's own, returned.
    New,
    /// The caller's host memory.
    Host(HostOutput),
    /// The caller's device memory.
    Device(DeviceRegion),
}

impl Target {
    /// The engine of a read into this target with `device`, `None` for the
    /// CPU: host memory is written by the CPU, device memory by its GPU.
    pub(super) fn engine(&self, device: Backend) -> Result<Option<Arc<CudaEngine>>, ReadError> {
        let unavailable = |e| ReadError::Engine(crate::Error::GpuUnavailable(e));
        match (self, device) {
            (Self::Host(_), Backend::Cuda { device }) => Err(invalid(format!(
                "host memory is written by a read on the CPU, not on cuda:{device}"
            ))),
            (Self::Host(_), _) => Ok(None),
            (Self::Device(_), Backend::Cpu) => Err(invalid(
                "device memory is written by a read on a GPU, not on the CPU".into(),
            )),
            (Self::Device(_), Backend::Auto) => Backend::Cuda { device: 0 }.resolve().map_err(unavailable),
            (Self::New, device) | (Self::Device(_), device) => device.resolve().map_err(unavailable),
        }
    }

    /// Checks that lent memory holds exactly `len` bytes and, on the device,
    /// that it is memory of `engine`'s device.
    pub(super) fn check(&self, engine: Option<&CudaEngine>, len: usize) -> Result<(), ReadError> {
        let lent = match self {
            Self::New => return Ok(()),
            Self::Host(out) => out.len(),
            Self::Device(region) => region.len,
        };
        if lent != len {
            return Err(invalid(format!("it has {lent} bytes, the selection needs {len}")));
        }
        match (self, engine) {
            (Self::Device(region), Some(engine)) if len > 0 => {
                let ours = engine.addresses_device_memory(region.ptr).map_err(ReadError::Engine)?;
                if !ours {
                    return Err(invalid(format!(
                        "{:#x} is not device memory of cuda:{}",
                        region.ptr,
                        engine.device()
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Where a CPU decoder writes: the lent host memory, or new memory.
    pub(super) fn into_host(self, shape: &[u64], len: usize) -> Result<HostOutput, ReadError> {
        match self {
            Self::Host(out) => Ok(out),
            Self::New | Self::Device(_) => HostOutput::allocate(shape, len),
        }
    }

    /// Where a GPU decoder on `engine` writes: the lent device memory, or new memory.
    pub(super) fn into_device(
        self,
        engine: Arc<CudaEngine>,
        shape: &[u64],
        len: usize,
    ) -> Result<DeviceOutput, ReadError> {
        match self {
            // SAFETY: the caller of `LentDevice::new` vouched for the region
            // while the read runs; `check` found it on this engine's device.
            Self::Device(region) => Ok(unsafe { DeviceOutput::lent(engine, region) }),
            Self::New | Self::Host(_) => DeviceOutput::allocate(engine, shape, len),
        }
    }

    /// The device part of this target: itself where it is device memory,
    /// else new memory.
    pub(super) fn device_part(&self) -> Self {
        match self {
            Self::Device(region) => Self::Device(*region),
            Self::New | Self::Host(_) => Self::New,
        }
    }
}

fn invalid(reason: String) -> ReadError {
    ReadError::InvalidOutput { reason }
}

/// The right to write memory lent to a read: held by each wave's decoding,
/// and ended, for good, when the read ends.
#[derive(Debug, Default)]
pub(super) struct Lease {
    ended: Mutex<bool>,
}

impl Lease {
    /// Holds the lease until the guard is dropped; an error once it has ended.
    fn hold(&self) -> Result<MutexGuard<'_, bool>, ReadError> {
        let held = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if *held {
            return Err(ReadError::Pipeline {
                reason: "the read ended while a wave was waiting to be decoded".into(),
            });
        }
        Ok(held)
    }

    /// Ends the lease once the wave being decoded (if any) is in place:
    /// nothing writes the memory afterwards.
    fn end(&self) {
        *self.ended.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }
}

/// Ends a lease when dropped: with the read that holds it, whether it
/// finished or was dropped half-way.
pub(super) struct LeaseEnd(pub(super) Arc<Lease>);

impl Drop for LeaseEnd {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A decoder that decodes each wave holding `lease` (where the output is
/// lent).
pub(super) struct Leased<D> {
    decoder: D,
    lease: Option<Arc<Lease>>,
}

impl<D> Leased<D> {
    /// `decoder`, its waves decoded under `lease` where there is one.
    pub(super) fn new(decoder: D, lease: Option<Arc<Lease>>) -> Self {
        Self { decoder, lease }
    }

    /// The decoder.
    pub(super) fn into_inner(self) -> D {
        self.decoder
    }
}

impl<D: WaveDecoder> WaveDecoder for Leased<D> {
    fn wave_bytes(&self, requested: usize) -> usize {
        self.decoder.wave_bytes(requested)
    }

    fn arenas(&self) -> Option<ArenaSource> {
        self.decoder.arenas()
    }

    fn decode_wave(&self, wave: &[WaveItem<'_>]) -> Result<(), ReadError> {
        let _held = self.lease.as_deref().map(Lease::hold).transpose()?;
        self.decoder.decode_wave(wave)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_lease_is_not_held_again() {
        let lease = Arc::new(Lease::default());
        drop(lease.hold().unwrap());
        drop(LeaseEnd(lease.clone()));
        assert!(matches!(lease.hold(), Err(ReadError::Pipeline { .. })));
    }

    #[test]
    fn host_targets_are_read_on_the_cpu() {
        let mut bytes = [0u8; 4];
        // SAFETY: `bytes` outlives the target and nothing else uses it.
        let target = Target::Host(unsafe { HostOutput::lent(&mut bytes) });
        assert!(target.engine(Backend::Auto).unwrap().is_none());
        assert!(target.engine(Backend::Cpu).unwrap().is_none());
        let err = target.engine(Backend::Cuda { device: 1 }).unwrap_err();
        assert!(err.to_string().contains("cuda:1"), "{err}");
        assert!(target.check(None, 4).is_ok());
        let err = target.check(None, 8).unwrap_err();
        assert!(
            matches!(&err, ReadError::InvalidOutput { reason } if reason.contains("4 bytes") && reason.contains("8")),
            "{err}"
        );
        let device = Target::Device(DeviceRegion { ptr: 0, len: 4 });
        assert!(matches!(
            device.engine(Backend::Cpu),
            Err(ReadError::InvalidOutput { .. })
        ));
    }
}
