//! Default limits on the decoded size a buffer may declare.
//!
//! The limit guards against absurd declarations (a corrupt or hostile header
//! claiming terabytes) before anything is allocated, without refusing data the
//! codec itself wrote: by default it is what the destination memory can hold
//! at all, the machine's physical memory for host outputs and the device's
//! memory for device outputs.

use std::sync::OnceLock;

/// The limit where the machine's memory cannot be read: the largest
/// allocation Rust allows.
const UNKNOWN_MEMORY_LIMIT: u64 = isize::MAX as u64;

/// Most dimensions of an array the reader and the writer take: NumPy's
/// arrays (and zarr-python's) have at most 64. Metadata of more is refused
/// before anything is planned, which costs time in the square of the
/// dimensions.
pub const MAX_DIMENSIONS: usize = 64;

/// Physical memory of this machine in bytes, `None` where it cannot be read.
pub fn host_memory() -> Option<u64> {
    static MEMORY: OnceLock<Option<u64>> = OnceLock::new();
    *MEMORY.get_or_init(read_host_memory)
}

#[cfg(target_os = "linux")]
fn read_host_memory() -> Option<u64> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page_size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGE_SIZE)) };
    let pages = u64::try_from(pages).ok().filter(|p| *p > 0)?;
    let page_size = u64::try_from(page_size).ok().filter(|p| *p > 0)?;
    Some(pages.saturating_mul(page_size))
}

#[cfg(not(target_os = "linux"))]
fn read_host_memory() -> Option<u64> {
    None
}

/// The default limit for buffers decoded into host memory: the machine's
/// physical memory, or the process's address-space limit (`RLIMIT_AS`)
/// where that is lower, read at each call since a process may lower it at
/// any time. An allocation past either fails, and Rust's allocation
/// failures abort the process: a size past it is refused before it is
/// allocated.
pub fn default_max_decoded_size() -> u64 {
    let memory = host_memory().unwrap_or(UNKNOWN_MEMORY_LIMIT);
    address_space_limit().map_or(memory, |limit| memory.min(limit))
}

/// The soft limit of this process's address space, `None` where there is
/// none or it cannot be read.
#[cfg(unix)]
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the one struct it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    (read == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn address_space_limit() -> Option<u64> {
    None
}

/// How an error words a decoded `size` above `limit`: the size a buffer
/// declares, or, for one that declares none (`size` is then `limit + 1`),
/// that it decodes to more than the limit. Raising the limit (`how`) is
/// advised only for sizes this machine's memory holds: past it the stream
/// is corrupt or hostile (a decompression bomb), and no limit would help.
pub(crate) fn too_large(size: u64, limit: u64, how: &str) -> String {
    let what = if size == limit.saturating_add(1) {
        format!("decodes to more than the limit of {limit} bytes")
    } else {
        format!("declares {size} decoded bytes, above the limit of {limit} bytes")
    };
    match host_memory() {
        Some(memory) if size > memory => {
            format!("{what}, more than this machine's memory ({memory} bytes): a corrupt or hostile stream")
        }
        _ => format!("{what}; raise the limit with {how}"),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_the_memory_are_not_advised_a_higher_limit() {
        let memory = host_memory().expect("Linux test machines have their memory size");
        let bomb = too_large(50_000_000_000_000, memory, "max_decoded_size");
        assert!(bomb.contains("declares 50000000000000 decoded bytes"), "{bomb}");
        assert!(bomb.contains("hostile") && !bomb.contains("raise"), "{bomb}");
        let streamed = too_large(memory + 1, memory, "max_decoded_size");
        assert!(
            streamed.contains("decodes to more than the limit") && !streamed.contains("raise"),
            "{streamed}"
        );
        let small = too_large(2000, 1000, "max_decoded_size");
        assert!(
            small.contains("declares 2000") && small.contains("raise the limit with max_decoded_size"),
            "{small}"
        );
        assert!(too_large(1001, 1000, "x").contains("decodes to more than the limit of 1000 bytes"));
    }

    #[test]
    fn host_limit_is_the_machines_memory() {
        let meminfo = std::fs::read_to_string("/proc/meminfo").expect("Linux test machines have /proc/meminfo");
        let kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("MemTotal in kB");
        let limit = default_max_decoded_size();
        // MemTotal leaves out memory the kernel reserved at boot: within 10 %.
        assert!(
            limit >= kib * 1024 && limit <= kib * 1024 / 9 * 10,
            "{limit} vs MemTotal {kib} kB"
        );
    }
}
