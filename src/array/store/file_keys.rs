//! Which chunk keys name the file a store of local files would read: a key
//! is joined to the directory as object_store's local file system joins it
//! only where both agree, keys of ASCII letters, digits, `.`, `_`, `-` and
//! `/`, with no empty, `.` or `..` segment. The reader and the writer read
//! and write the files of other keys through the store.

/// Whether the file of `key` is where object_store's local file system
/// would look for it, joined to its root as it is (see the module documentation).
pub(crate) fn is_plain_key(key: &str) -> bool {
    key.split('/').all(|segment| {
        !matches!(segment, "" | "." | "..")
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_are_those_both_joins_agree_on() {
        for key in ["c/0/1", "0.0", "a.zarr/c/1/2", "x_y-z/0.1.2"] {
            assert!(is_plain_key(key), "{key}");
        }
        for key in ["a b/0", "a%20b/0", "ü/0", "c//0", "./c/0", "c/../0", "/c/0", "c/0/", ""] {
            assert!(!is_plain_key(key), "{key}");
        }
    }
}
