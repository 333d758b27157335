//! Big-endian chunks on the batched path (v3 `bytes` with `endian: big`,
//! zarr v2 data types such as `>f4`): each decoded chunk's words are
//! byte-swapped in place ([`ElementFilters::swap`](crate::format::filters::ElementFilters::swap)).

/// The bytes of each word a big-endian chunk of `data_type` (its v3 name or
/// v2 NumPy `str`), of elements of `elem` bytes, swaps: the element, or each
/// half of a complex one. Other data types (raw bits, strings, ...) are
/// read by zarrs.
pub(super) fn swap_width(data_type: &str, elem: usize) -> Result<usize, String> {
    let unsupported = || Err(format!("big-endian data type {data_type} has no batched byte swap"));
    let complex = match data_type.strip_prefix(['>', '<', '|', '=']) {
        // A v2 NumPy type: its kind.
        Some(code) => match code.chars().next() {
            Some('c') => true,
            Some('i' | 'u' | 'f' | 'M' | 'm') => false,
            _ => return unsupported(),
        },
        None if data_type.starts_with("complex") => true,
        None if [
            "int",
            "uint",
            "float",
            "bfloat16",
            "numpy.datetime64",
            "numpy.timedelta64",
        ]
        .iter()
        .any(|prefix| data_type.starts_with(prefix)) =>
        {
            false
        }
        None => return unsupported(),
    };
    let word = if complex { elem / 2 } else { elem };
    match word {
        1 => Ok(1),
        2 | 4 | 8 => Ok(word),
        _ => unsupported(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_elements_or_halves_of_complex_ones() {
        for (data_type, elem, word) in [
            (">i2", 2, 2),
            (">f8", 8, 8),
            (">M8[ns]", 8, 8),
            (">c8", 8, 4),
            (">c16", 16, 8),
            ("uint32", 4, 4),
            ("float16", 2, 2),
            ("complex128", 16, 8),
            ("numpy.datetime64", 8, 8),
        ] {
            assert_eq!(swap_width(data_type, elem), Ok(word), "{data_type}");
        }
        for (data_type, elem) in [(">U4", 16), ("r16", 2), (">V8", 8), ("string", 8), ("float128", 16)] {
            let err = swap_width(data_type, elem).unwrap_err();
            assert!(err.contains(data_type), "{err}");
        }
    }
}
