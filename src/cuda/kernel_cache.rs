//! The kernels an engine has loaded: one of each family, loaded into the
//! engine's context at first use and kept, keyed by its type, so that the
//! engine core names no kernel family.

use std::any::{Any, TypeId};
use std::collections::hash_map::{Entry, HashMap};
use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::error::Result;

/// A kernel family's loaded state: its module and the device memory its
/// launches reuse.
pub(super) trait Kernel: Any + Send + Sized {
    /// Compiles and loads the kernel into `ctx`.
    fn load(ctx: &Arc<CudaContext>) -> Result<Self>;
}

/// The kernels loaded so far, at most one of each type.
#[derive(Default)]
pub(super) struct Kernels(HashMap<TypeId, Box<dyn Any + Send>>);

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels").field("loaded", &self.0.len()).finish()
    }
}

impl Kernels {
    /// The kernel `K`, loaded into `ctx` where this is its first use.
    pub(super) fn get<K: Kernel>(&mut self, ctx: &Arc<CudaContext>) -> Result<&mut K> {
        let kernel = match self.0.entry(TypeId::of::<K>()) {
            Entry::Occupied(loaded) => loaded.into_mut(),
            Entry::Vacant(slot) => slot.insert(Box::new(K::load(ctx)?)),
        };
        // Every entry holds a value of the type it is keyed by.
        Ok(kernel.downcast_mut().expect("a kernel is stored under its own type"))
    }
}
