//! Host memory for decoded outputs: advice to the kernel on how to back large
//! buffers that the decoders are about to fill.

/// Asks Linux to back a large, still untouched output with transparent huge
/// pages: faulting in fresh 4 KiB pages costs as much as decoding LZ4 into
/// them, 2 MiB pages a fraction of it. Only advice: failure changes nothing.
pub(crate) fn advise_huge_pages(data: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = (data.as_mut_ptr() as usize).next_multiple_of(HUGE);
        let end = (data.as_mut_ptr() as usize + data.len()) / HUGE * HUGE;
        if data.len() >= 4 * HUGE && end > start {
            // SAFETY: [start, end) lies within `data`, which we own; madvise
            // with MADV_HUGEPAGE does not change its contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = data;
}
