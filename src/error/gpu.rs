//! [`GpuUnavailable`]: why the CUDA backend cannot be used, each message
//! saying what is missing and how to fix it.

use std::fmt;

use cudarc::driver::DriverError;

use super::Error;

/// Why the CUDA backend cannot be used on this machine. Each message says
/// what is missing and how to fix it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum GpuUnavailable {
    /// `libcuda.so.1` (the driver library) could not be opened.
    NoLibcuda,
    /// The driver loaded, but it reports no CUDA device.
    NoDevice,
    /// The requested device ordinal does not exist.
    NoSuchDevice {
        /// The ordinal that was asked for.
        requested: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The driver is older than CUDA 12, which nvCOMP 6 needs.
    DriverTooOld {
        /// `cuDriverGetVersion`, e.g. 11080 for CUDA 11.8.
        version: i32,
    },
    /// No nvCOMP of the major version the bindings are for could be opened.
    NvcompNotFound {
        /// Every place that was tried, with the loader's answer
        /// ([`nvcomp_sys::LoadError::tried_list`]).
        tried: String,
        /// `cuDriverGetVersion`, which decides the wheel to install.
        driver_version: i32,
    },
    /// Only files of another nvCOMP major version were found.
    NvcompVersion {
        /// The files, with the version each reports (`"5.3.0"`).
        found: Vec<(String, String)>,
        /// `cuDriverGetVersion`, which decides the wheel to install.
        driver_version: i32,
    },
    /// nvCOMP was built for a newer CUDA major version than the driver supports
    /// (the `-cu13` wheel on a CUDA 12 driver).
    NvcompNeedsNewerDriver {
        /// The file nvCOMP was opened from.
        path: String,
        /// The CUDA runtime version nvCOMP was built with, e.g. 13040.
        nvcomp_cuda: u32,
        /// `cuDriverGetVersion`, e.g. 12080.
        driver_version: i32,
    },
    /// A driver call failed while setting up CUDA.
    Driver(DriverError),
    /// The device's engine (its context, stream and nvCOMP) could not be set up.
    Engine(Box<Error>),
    /// This process was forked from one that had initialised CUDA, which a
    /// child cannot use: the driver's state belongs to the parent.
    Forked,
}

/// `12.8` for 12080, as CUDA writes its versions.
fn cuda_version(version: i64) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// The extra of the Python package that installs the nvCOMP wheel matching a
/// driver: CUDA 13 wheels need a CUDA 13 driver, CUDA 12 ones run on 12 and later.
pub fn nvcomp_extra(driver_version: i32) -> &'static str {
    if driver_version >= 13000 {
        "cu13"
    } else {
        "cu12"
    }
}

/// How to install nvCOMP for a driver, from Python and otherwise.
fn install_hint(driver_version: i32) -> String {
    let extra = nvcomp_extra(driver_version);
    format!(
        "install it with `pip install \"zarrs-nvcomp[{extra}]\"` (the driver supports CUDA {}), \
         or set NVCOMP_LIBRARY to the path of {}",
        cuda_version(driver_version.into()),
        nvcomp_sys::LIBRARY_NAME
    )
}

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLibcuda => write!(
                f,
                "no libcuda: the NVIDIA driver library libcuda.so.1 is not installed or not on the \
                 loader's path; install the NVIDIA driver (580 or newer for the [cu13] extra, 525 \
                 or newer for [cu12]), or use device=\"cpu\""
            ),
            Self::NoDevice => write!(
                f,
                "no device: the NVIDIA driver reports no CUDA device; check `nvidia-smi` and \
                 CUDA_VISIBLE_DEVICES, or use device=\"cpu\""
            ),
            Self::NoSuchDevice { requested, count } => write!(
                f,
                "no device cuda:{requested}: the driver reports {count} device(s), cuda:0 to cuda:{}",
                count.saturating_sub(1)
            ),
            Self::DriverTooOld { version } => write!(
                f,
                "driver too old: it supports CUDA {}, nvCOMP {} needs CUDA 12 or newer; \
                 update the NVIDIA driver (525 or newer for CUDA 12, 580 or newer for CUDA 13)",
                cuda_version((*version).into()),
                nvcomp_sys::NVCOMP_VER_MAJOR
            ),
            Self::NvcompNotFound { tried, driver_version } => write!(
                f,
                "nvCOMP missing: {} not found (tried {tried}); {}",
                nvcomp_sys::LIBRARY_NAME,
                install_hint(*driver_version)
            ),
            Self::NvcompVersion { found, driver_version } => {
                write!(f, "nvCOMP version mismatch: ")?;
                for (i, (path, version)) in found.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{path} is nvCOMP {version}")?;
                }
                write!(
                    f,
                    "; this build needs nvCOMP {}: {}",
                    nvcomp_sys::NVCOMP_VER_MAJOR,
                    install_hint(*driver_version)
                )
            }
            Self::NvcompNeedsNewerDriver {
                path,
                nvcomp_cuda,
                driver_version,
            } => write!(
                f,
                "nvCOMP and driver mismatch: {path} was built for CUDA {}, the driver supports CUDA {}; \
                 install `pip install \"zarrs-nvcomp[{}]\"` (and uninstall nvidia-libnvcomp-cu{}), \
                 or update the NVIDIA driver",
                cuda_version((*nvcomp_cuda).into()),
                cuda_version((*driver_version).into()),
                nvcomp_extra(*driver_version),
                nvcomp_cuda / 1000
            ),
            Self::Driver(source) => write!(f, "CUDA driver error: {source}"),
            Self::Engine(source) => write!(f, "CUDA driver error: {source}"),
            Self::Forked => write!(
                f,
                "CUDA cannot be used in a process forked after CUDA was initialised in its parent; \
                 start worker processes with the 'spawn' (or 'forkserver') start method \
                 (multiprocessing.get_context('spawn'), DataLoader(multiprocessing_context='spawn'))"
            ),
        }
    }
}

impl std::error::Error for GpuUnavailable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Driver(source) => Some(source),
            Self::Engine(source) => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// What to add to a driver error that leaves the context unusable: the
/// process must restart, and which decoders can cause it.
pub(super) fn sticky_note(error: &DriverError) -> &'static str {
    use cudarc::driver::sys::CUresult::*;
    match error.0 {
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_HARDWARE_STACK_ERROR => {
            ": the GPU context is unusable until the process restarts; nvCOMP's decoders for \
             deflate, gzip, gdeflate, cascaded, bitcomp and ans (and for snappy and zstd on device-resident \
             input) do not validate corrupt input (decode untrusted data with the CPU backend)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::GpuUnavailable;

    fn message(reason: GpuUnavailable) -> String {
        reason.to_string()
    }

    #[test]
    fn driver_messages_say_what_to_install_or_check() {
        let m = message(GpuUnavailable::NoLibcuda);
        assert!(
            m.starts_with("no libcuda:")
                && m.contains("install the NVIDIA driver")
                && m.contains("580 or newer for the [cu13] extra"),
            "{m}"
        );
        let m = message(GpuUnavailable::NoDevice);
        assert!(m.starts_with("no device:") && m.contains("CUDA_VISIBLE_DEVICES"), "{m}");
        let m = message(GpuUnavailable::NoSuchDevice { requested: 3, count: 2 });
        assert!(
            m.contains("cuda:3") && m.contains("2 device(s), cuda:0 to cuda:1"),
            "{m}"
        );
        let m = message(GpuUnavailable::DriverTooOld { version: 11080 });
        assert!(
            m.contains("supports CUDA 11.8") && m.contains("update the NVIDIA driver"),
            "{m}"
        );
        // (A DriverError's message needs libcuda: an engine error stands in.)
        let engine = GpuUnavailable::Engine(Box::new(crate::Error::Nvcomp {
            call: "nvcompBatchedLZ4DecompressGetTempSizeAsync",
            status: "nvcompErrorInternal".into(),
        }));
        assert_eq!(
            message(engine.clone()),
            "CUDA driver error: nvCOMP error in nvcompBatchedLZ4DecompressGetTempSizeAsync: nvcompErrorInternal"
        );
        let source = std::error::Error::source(&engine).expect("the engine's error is kept");
        assert!(source.to_string().starts_with("nvCOMP error in"), "{source}");
    }

    #[test]
    fn missing_nvcomp_names_the_extra_for_the_driver() {
        let missing = |driver_version| {
            message(GpuUnavailable::NvcompNotFound {
                tried: "/a/libnvcomp.so.6 (no such file)".into(),
                driver_version,
            })
        };
        let m = missing(13000);
        assert!(
            m.starts_with("nvCOMP missing: libnvcomp.so.6 not found (tried /a/libnvcomp.so.6 (no such file))"),
            "{m}"
        );
        assert!(
            m.contains(r#"pip install "zarrs-nvcomp[cu13]""#) && m.contains("CUDA 13.0"),
            "{m}"
        );
        let m = missing(12080);
        assert!(
            m.contains(r#"pip install "zarrs-nvcomp[cu12]""#) && m.contains("CUDA 12.8"),
            "{m}"
        );
        assert!(m.contains("NVCOMP_LIBRARY"), "{m}");
    }

    #[test]
    fn version_mismatches_name_the_files_and_the_fix() {
        let m = message(GpuUnavailable::NvcompVersion {
            found: vec![("/opt/nvcomp/libnvcomp.so".into(), "5.3.0".into())],
            driver_version: 12090,
        });
        assert!(
            m.starts_with("nvCOMP version mismatch: /opt/nvcomp/libnvcomp.so is nvCOMP 5.3.0;"),
            "{m}"
        );
        assert!(m.contains("needs nvCOMP 6") && m.contains("zarrs-nvcomp[cu12]"), "{m}");
        let m = message(GpuUnavailable::NvcompNeedsNewerDriver {
            path: "/venv/nvidia/libnvcomp/lib64/libnvcomp.so.6".into(),
            nvcomp_cuda: 13040,
            driver_version: 12080,
        });
        assert!(m.contains("built for CUDA 13.4, the driver supports CUDA 12.8"), "{m}");
        assert!(
            m.contains("zarrs-nvcomp[cu12]") && m.contains("uninstall nvidia-libnvcomp-cu13"),
            "{m}"
        );
    }
}
