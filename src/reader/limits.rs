//! The size of a read's output, checked against the memory that must hold
//! it before anything is planned or allocated: a read larger than the
//! machine (or the GPU) is an error naming its size, never an abort.

use crate::cuda::CudaEngine;

use super::ReadOptions;
use crate::array::error::ReadError;

/// The largest decoded size of one chunk of a read with `options` on
/// `engine` (`None`: the CPU): the option where it is set, else what the
/// destination memory holds.
pub(crate) fn max_decoded_size(options: &ReadOptions, engine: Option<&CudaEngine>) -> u64 {
    options.max_decoded_size.unwrap_or_else(|| match engine {
        Some(engine) => engine.total_memory(),
        None => crate::limits::default_max_decoded_size(),
    })
}

/// Bytes of an output of `shape` with elements of `elem` bytes, checked to
/// fit the memory of the machine (host outputs) or of `engine`'s device.
pub(crate) fn checked_output_len(shape: &[u64], elem: usize, engine: Option<&CudaEngine>) -> Result<usize, ReadError> {
    let bytes = shape
        .iter()
        .fold(elem as u128, |acc, n| acc.saturating_mul(u128::from(*n)));
    let too_large = |reason: String| ReadError::OutputTooLarge {
        shape: shape.to_vec(),
        bytes,
        reason,
        source: None,
    };
    let len = usize::try_from(bytes).map_err(|_| too_large("more than this machine can address".into()))?;
    let (memory, what) = match engine {
        None => (crate::limits::host_memory(), "this machine's memory"),
        Some(engine) => (Some(engine.total_memory()), "the GPU's memory"),
    };
    if let Some(memory) = memory.filter(|m| bytes > u128::from(*m)) {
        return Err(too_large(format!("more than {what} ({memory} bytes)")));
    }
    Ok(len)
}

/// `len` zero bytes, or `None` when the allocator refuses them. The memory
/// comes from `alloc_zeroed` (calloc), whose fresh pages the kernel zeroes
/// lazily, as the decoders first write them.
pub(crate) fn try_zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of
    // `len` bytes of alignment 1, all initialised (zeroed).
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_beyond_memory_are_refused_with_their_shape_and_size() {
        match checked_output_len(&[10_000_000_000_000, 120], 4, None) {
            Err(ReadError::OutputTooLarge {
                shape, bytes, reason, ..
            }) => {
                assert_eq!(shape, [10_000_000_000_000, 120]);
                assert_eq!(bytes, 4_800_000_000_000_000);
                assert!(reason.contains("memory"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // Overflowing u64 products are saturated, not wrapped.
        assert!(matches!(
            checked_output_len(&[u64::MAX, u64::MAX, 4], 8, None),
            Err(ReadError::OutputTooLarge { .. })
        ));
        assert_eq!(checked_output_len(&[1000, 3], 2, None).unwrap(), 6000);
        assert_eq!(checked_output_len(&[0, u64::MAX], 2, None).unwrap(), 0);
    }

    #[test]
    fn refused_allocations_are_none() {
        assert_eq!(try_zeroed(3), Some(vec![0; 3]));
        assert_eq!(try_zeroed(0), Some(Vec::new()));
        assert!(try_zeroed(usize::MAX).is_none());
    }
}
