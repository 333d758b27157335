//! Opening the CUDA driver and nvCOMP, and the engine of each device.
//!
//! Both libraries are opened at run time and checked before use: cudarc
//! panics where `libcuda` is absent, a forked child cannot use a driver its
//! parent initialised, and an nvCOMP built for a newer CUDA major version
//! than the driver's fails in every call. Each check that fails says why the
//! GPU is unusable ([`GpuUnavailable`]). An engine is created once per
//! device and shared.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{result, sys};

use super::CudaEngine;
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

impl CudaEngine {
    /// The engine of device `device`, created on first use and shared after;
    /// the error says why the device cannot be used.
    pub fn get(device: usize) -> Result<Arc<Self>, GpuUnavailable> {
        static ENGINES: OnceLock<Mutex<HashMap<usize, Arc<CudaEngine>>>> = OnceLock::new();
        let driver = probe_driver()?;
        if device >= driver.count {
            return Err(GpuUnavailable::NoSuchDevice {
                requested: device,
                count: driver.count,
            });
        }
        let lib = open_nvcomp(driver.version)?;
        let mut engines = ENGINES
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(engine) = engines.get(&device) {
            return Ok(engine.clone());
        }
        let engine = Arc::new(CudaEngine::create(device, lib).map_err(|e| GpuUnavailable::Engine(Box::new(e)))?);
        engines.insert(device, engine.clone());
        Ok(engine)
    }

    /// `count` (at least one) engines of device `device`, the first
    /// [`get`](Self::get)'s, each with its own stream and scratch memory,
    /// created on first use and shared after: batches given to different
    /// engines run on the device at the same time.
    ///
    /// Batches of few large chunks need this: the time of one nvCOMP
    /// Zstandard compression on the H200 hardly depends on how many chunks it
    /// has (121 ms for 256 chunks of 1 MiB, 166 ms for 1,024), so one batch at
    /// a time leaves most of the GPU idle.
    pub fn lanes(device: usize, count: usize) -> Result<Vec<Arc<Self>>, GpuUnavailable> {
        static EXTRA: OnceLock<Mutex<HashMap<usize, Vec<Arc<CudaEngine>>>>> = OnceLock::new();
        let first = Self::get(device)?;
        let mut extra = EXTRA
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let more = extra.entry(device).or_default();
        while more.len() + 1 < count {
            let engine = CudaEngine::create(device, first.lib).map_err(|e| GpuUnavailable::Engine(Box::new(e)))?;
            more.push(Arc::new(engine));
        }
        let more = more[..count.max(1) - 1].iter().cloned();
        Ok(std::iter::once(first).chain(more).collect())
    }
}
