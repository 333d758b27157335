//! The kernels an engine has loaded: one of each family, loaded into the
//! engine's context at first use and kept, keyed by its family, so that the
//! engine core names no kernel family.
//!
//! A family says where its code is and what device memory its launches
//! reuse ([`KernelFamily`]); [`LoadedKernel`] is the one holder of both, and
//! each family's module adds its launches as methods of
//! `LoadedKernel<Family>`.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::hash_map::{Entry, HashMap};
use std::fmt::Debug;
use std::sync::Arc;

use cudarc::driver::CudaContext;

use super::memory::DeviceBuffer;
use super::ptx::PtxKernel;
use crate::error::Result;

/// A kernel family: its PTX, its entry point, and the device memory its
/// launches reuse.
pub(super) trait KernelFamily: 'static {
    /// The entry point's name in the PTX module.
    const ENTRY: &'static str;
    /// The device memory launches reuse, allocated at first need.
    type Memory: Default + Debug + Send;
    /// The PTX module text.
    fn ptx() -> Cow<'static, str>;
}

/// The device memory of a family whose launches read one table the host
/// uploads (of buffers, blocks or copies).
pub(super) type Table = Option<DeviceBuffer>;

/// The device memory of a family whose launches read a table the host
/// uploads and write verdicts the host reads back.
#[derive(Debug, Default)]
pub(super) struct TableAndVerdicts {
    /// The uploaded table.
    pub(super) table: Table,
    /// The verdicts, written by the kernel.
    pub(super) verdicts: Option<DeviceBuffer>,
}

/// A kernel family loaded into one context, with its device memory.
#[derive(Debug)]
pub(super) struct LoadedKernel<F: KernelFamily> {
    /// The loaded entry point.
    pub(super) kernel: PtxKernel,
    /// The device memory its launches reuse.
    pub(super) memory: F::Memory,
}

/// The kernels loaded so far, at most one of each family.
#[derive(Default)]
pub(super) struct Kernels(HashMap<TypeId, Box<dyn Any + Send>>);

impl Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels").field("loaded", &self.0.len()).finish()
    }
}

impl Kernels {
    /// The kernel of family `F`, loaded into `ctx` where this is its first
    /// use.
    pub(super) fn get<F: KernelFamily>(&mut self, ctx: &Arc<CudaContext>) -> Result<&mut LoadedKernel<F>> {
        let kernel = match self.0.entry(TypeId::of::<F>()) {
            Entry::Occupied(loaded) => loaded.into_mut(),
            Entry::Vacant(slot) => {
                let loaded = LoadedKernel::<F> {
                    kernel: PtxKernel::load(ctx, &F::ptx(), F::ENTRY)?,
                    memory: F::Memory::default(),
                };
                slot.insert(Box::new(loaded))
            }
        };
        // Every entry holds the loaded kernel of the family it is keyed by.
        Ok(kernel.downcast_mut().expect("a kernel is stored under its own family"))
    }
}
