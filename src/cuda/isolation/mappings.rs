//! The worker's table of the engine allocations it holds open.
//!
//! The worker keeps an allocation open from one request to the next while the
//! engine keeps sending its id, so that a call costs no `cuIpcOpenMemHandle`.
//! The engine frees and replaces its scratch memory without telling the
//! worker, though: a bigger batch, an encode or a decode the worker never
//! hears of (in-process, or one that failed before its call) grows a scratch
//! buffer, which frees the old one. The driver may then hand the freed range
//! to the engine's next allocation, and opening that one's handle while the
//! worker still holds the old allocation open fails with
//! `CUDA_ERROR_ALREADY_MAPPED`. So before opening anything, the worker closes
//! every allocation the request does not name: those the engine may have
//! freed.

use cudarc::driver::sys::CUdeviceptr;

use super::protocol::Shared;
use crate::error::Result;

/// One engine allocation held open: its id, its address in the worker, and
/// `open`, which closes it when dropped.
struct Entry<M> {
    id: u64,
    ptr: CUdeviceptr,
    _open: M,
}

/// The engine allocations the worker holds open, `M` closing one when dropped.
pub(super) struct Mappings<M> {
    held: Vec<Entry<M>>,
}

impl<M> Mappings<M> {
    pub(super) const fn new() -> Self {
        Self { held: Vec::new() }
    }

    /// The worker's address of each of `wanted` (the allocations of one
    /// request), opening with `open` those not held. When something must be
    /// opened, every held allocation that `wanted` does not name is closed
    /// first (see the module documentation). An allocation named twice is
    /// opened once.
    pub(super) fn map(
        &mut self,
        wanted: &[&Shared],
        mut open: impl FnMut(&Shared) -> Result<(CUdeviceptr, M)>,
    ) -> Result<Vec<CUdeviceptr>> {
        let held = |held: &[Entry<M>], id| held.iter().any(|e| e.id == id);
        if wanted.iter().any(|s| !held(&self.held, s.id)) {
            self.held.retain(|e| wanted.iter().any(|s| s.id == e.id));
        }
        let mut ptrs = Vec::with_capacity(wanted.len());
        for shared in wanted {
            if !held(&self.held, shared.id) {
                let (ptr, open) = open(shared)?;
                self.held.push(Entry {
                    id: shared.id,
                    ptr,
                    _open: open,
                });
            }
            let entry = self
                .held
                .iter()
                .find(|e| e.id == shared.id)
                .expect("held or opened above");
            ptrs.push(entry.ptr);
        }
        Ok(ptrs)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::error::{Error, WorkerError};

    /// A model of the driver's imports: the engine's ranges held open, and
    /// every open and close in order. Like the driver, it refuses to open a
    /// range that overlaps one held open.
    #[derive(Default)]
    struct Driver {
        open: Vec<(u64, u64)>,
        log: Vec<String>,
    }

    /// An open range of the model, closed when dropped.
    struct Import(Rc<RefCell<Driver>>, (u64, u64));

    impl Drop for Import {
        fn drop(&mut self) {
            let mut d = self.0.borrow_mut();
            d.open.retain(|r| *r != self.1);
            d.log.push(format!("close {:#x}", self.1 .0));
        }
    }

    fn opener(driver: &Rc<RefCell<Driver>>) -> impl FnMut(&Shared) -> Result<(CUdeviceptr, Import)> + '_ {
        move |s| {
            let range = (s.base, s.base + s.len);
            let mut d = driver.borrow_mut();
            if d.open.iter().any(|r| r.0 < range.1 && range.0 < r.1) {
                // What the worker reported for CUDA_ERROR_ALREADY_MAPPED.
                return Err(Error::from(WorkerError::Reply {
                    message: format!("already mapped: {:#x}", s.base),
                }));
            }
            d.open.push(range);
            d.log.push(format!("open {:#x}", s.base));
            Ok((0x7f00_0000_0000 + s.base, Import(driver.clone(), range)))
        }
    }

    fn shared(id: u64, base: u64, len: u64) -> Shared {
        Shared {
            handle: [0; 64],
            id,
            base,
            len,
        }
    }

    #[test]
    fn memory_the_engine_replaced_is_closed_before_its_range_is_opened_again() {
        let driver = Rc::new(RefCell::new(Driver::default()));
        let mut mappings = Mappings::new();
        let (input, output) = (shared(1, 0x10_0000, 0x20_0000), shared(2, 0x30_0000, 0x20_0000));
        let ptrs = mappings.map(&[&input, &output], opener(&driver)).unwrap();
        assert_eq!(ptrs, [0x7f00_0010_0000, 0x7f00_0030_0000]);
        // A size query names only the input: nothing is opened or closed.
        mappings.map(&[&input], opener(&driver)).unwrap();
        assert_eq!(driver.borrow().log, ["open 0x100000", "open 0x300000"]);
        // The engine grew both scratch buffers; its new input lies where the
        // old output was, which the worker still holds.
        let (input, output) = (shared(3, 0x30_0000, 0x40_0000), shared(4, 0x70_0000, 0x20_0000));
        let ptrs = mappings.map(&[&input, &output], opener(&driver)).unwrap();
        assert_eq!(ptrs, [0x7f00_0030_0000, 0x7f00_0070_0000]);
        assert_eq!(
            driver.borrow().log[2..],
            ["close 0x100000", "close 0x300000", "open 0x300000", "open 0x700000"]
        );
    }

    #[test]
    fn an_allocation_named_twice_is_opened_once_and_kept() {
        let driver = Rc::new(RefCell::new(Driver::default()));
        let mut mappings = Mappings::new();
        let both = shared(5, 0x10_0000, 0x20_0000);
        let ptrs = mappings.map(&[&both, &both], opener(&driver)).unwrap();
        assert_eq!(ptrs, [0x7f00_0010_0000; 2]);
        mappings.map(&[&both], opener(&driver)).unwrap();
        assert_eq!(driver.borrow().log, ["open 0x100000"]);
    }
}
