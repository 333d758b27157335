//! Opening the CUDA driver and nvCOMP, and the engine of each device.
//!
//! Both libraries are opened at run time and checked before use: cudarc
//! panics where `libcuda` is absent, a forked child cannot use a driver its
//! parent initialised, and an nvCOMP built for a newer CUDA major version
//! than the driver's fails in every call. Each check that fails says why the
//! GPU is unusable ([`GpuUnavailable`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use cudarc::driver::{result, sys};

use crate::error::GpuUnavailable;

/// What the driver reports: how many devices, and its CUDA version
/// (`cuDriverGetVersion`, e.g. 13000).
#[derive(Debug, Clone, Copy)]
struct Driver {
    count: usize,
    version: i32,
}

/// The [`crate::fork::generation`] of the process that initialised the
/// driver (`u64::MAX`: none has).
static INITIALISED_IN: AtomicU64 = AtomicU64::new(u64::MAX);

/// Checks the driver before cudarc touches it: cudarc panics when `libcuda`
/// is absent, and the driver cannot be used in a child forked after its
/// parent initialised it.
fn probe_driver() -> Result<Driver, GpuUnavailable> {
    static DRIVER: OnceLock<Result<Driver, GpuUnavailable>> = OnceLock::new();
    crate::fork::register();
    let initialised_in = INITIALISED_IN.load(Ordering::Acquire);
    if initialised_in != u64::MAX && initialised_in != crate::fork::generation() {
        return Err(GpuUnavailable::Forked);
    }
    DRIVER
        .get_or_init(|| {
            // SAFETY: only tries to open the library.
            if !unsafe { sys::is_culib_present() } {
                return Err(GpuUnavailable::NoLibcuda);
            }
            result::init().map_err(GpuUnavailable::Driver)?;
            INITIALISED_IN.store(crate::fork::generation(), Ordering::Release);
            let mut version = 0;
            // SAFETY: writes one int.
            unsafe { sys::cuDriverGetVersion(&mut version) }
                .result()
                .map_err(GpuUnavailable::Driver)?;
            if version < 12000 {
                return Err(GpuUnavailable::DriverTooOld { version });
            }
            let count = result::device::get_count().map_err(GpuUnavailable::Driver)?;
            if count <= 0 {
                return Err(GpuUnavailable::NoDevice);
            }
            Ok(Driver {
                count: count as usize,
                version,
            })
        })
        .clone()
}

/// nvCOMP, checked against the driver: a build for a newer CUDA major
/// version than the driver's fails in every call.
fn open_nvcomp(driver_version: i32) -> Result<&'static nvcomp_sys::NvcompLibrary, GpuUnavailable> {
    let unavailable = |e: nvcomp_sys::LoadError| {
        if e.other_versions.is_empty() {
            GpuUnavailable::NvcompNotFound {
                tried: e.tried_list(),
                driver_version,
            }
        } else {
            GpuUnavailable::NvcompVersion {
                found: e.other_versions,
                driver_version,
            }
        }
    };
    let lib = nvcomp_sys::library().map_err(unavailable)?;
    let nvcomp_cuda = nvcomp_sys::library_properties().map_err(unavailable)?.cudart_version;
    if nvcomp_cuda / 1000 > driver_version as u32 / 1000 {
        return Err(GpuUnavailable::NvcompNeedsNewerDriver {
            path: nvcomp_sys::library_path().map_err(unavailable)?.display().to_string(),
            nvcomp_cuda,
            driver_version,
        });
    }
    Ok(lib)
}

/// nvCOMP, once the driver and device `device` are checked: what an
/// engine of that device is created with.
pub(super) fn open(device: usize) -> Result<&'static nvcomp_sys::NvcompLibrary, GpuUnavailable> {
    let driver = probe_driver()?;
    if device >= driver.count {
        return Err(GpuUnavailable::NoSuchDevice {
            requested: device,
            count: driver.count,
        });
    }
    open_nvcomp(driver.version)
}
