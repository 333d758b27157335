//! Zarr's metadata documents as they are stored: `zarr.json` (v3),
//! `.zarray`, `.zattrs`, `.zgroup` and `.zmetadata` (v2).
//!
//! - **Size.** A document is refused above a bound
//!   ([`DEFAULT_MAX_METADATA_SIZE`], or the storage option
//!   `max_metadata_size`) from the size its store reports, before its bytes
//!   are read: a sparse 20 GiB `.zattrs` would otherwise be read whole, and
//!   an allocation that fails aborts the process.
//! - **Non-finite numbers.** zarr-python writes NaN and the infinities as
//!   the bare tokens `NaN`, `Infinity` and `-Infinity` (Python's `json`
//!   module does, in attributes and in v2 fill values), which strict JSON
//!   parsers such as zarrs' refuse. Outside strings they are rewritten as
//!   the strings `"NaN"`, `"Infinity"` and `"-Infinity"`: the spelling the
//!   v2 and v3 specifications give fill values, which zarrs parses as the
//!   same numbers. In attributes they are then strings.

use std::borrow::Cow;

/// The default bound on a metadata document's size: 64 MiB, thousands of
/// times the largest array metadata seen (consolidated `.zmetadata` of
/// large hierarchies run to a few MiB).
pub const DEFAULT_MAX_METADATA_SIZE: u64 = 64 << 20;

/// The file names of zarr's metadata documents.
const DOCUMENTS: [&str; 5] = ["zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"];

/// Whether the store key `key` names a metadata document.
pub(crate) fn is_metadata_key(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    DOCUMENTS.contains(&name)
}

/// A metadata document larger than the bound: an I/O error of kind
/// `InvalidData` carries it through zarrs, and opening an array reports it
/// as [`ReadError::InvalidMetadata`](crate::array::error::ReadError::InvalidMetadata).
#[derive(Debug, thiserror::Error)]
#[error(
    "metadata document {key} is {size} bytes, more than the {limit} bytes taken (storage option max_metadata_size)"
)]
pub struct MetadataTooLarge {
    /// The document's store key.
    pub key: String,
    /// Its size, as the store reports it.
    pub size: u64,
    /// The bound it is over.
    pub limit: u64,
}

/// The bare non-finite tokens Python's `json` writes, longest first.
const NON_FINITE: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];

/// `json` with every bare `NaN`, `Infinity` and `-Infinity` outside strings
/// written as a string; borrowed where there is none (the usual case).
pub(crate) fn quote_non_finite(json: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < json.len() {
        let byte = json[i];
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if byte == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        // Outside strings, JSON has no identifiers but true, false and null:
        // a token that starts with `N`, `I` or `-I` can only be one of these.
        match NON_FINITE.iter().find(|token| json[i..].starts_with(token)) {
            Some(token) => {
                let out = out.get_or_insert_with(|| Vec::with_capacity(json.len() + 16));
                out.extend_from_slice(&json[copied..i]);
                out.push(b'"');
                out.extend_from_slice(token);
                out.push(b'"');
                i += token.len();
                copied = i;
            }
            None => i += 1,
        }
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut out) => {
            out.extend_from_slice(&json[copied..]);
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(json: &str) -> String {
        String::from_utf8(quote_non_finite(json.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn bare_non_finite_numbers_become_strings_outside_strings_only() {
        assert_eq!(
            quoted(r#"{"fill_value": NaN, "a": [Infinity, -Infinity, 1.5e3, -2]}"#),
            r#"{"fill_value": "NaN", "a": ["Infinity", "-Infinity", 1.5e3, -2]}"#
        );
        assert_eq!(quoted("[NaN,NaN]"), r#"["NaN","NaN"]"#);
        let untouched = r#"{"s": "NaN Infinity -Infinity \" NaN \\", "t": "\\\"NaN"}"#;
        assert!(matches!(quote_non_finite(untouched.as_bytes()), Cow::Borrowed(_)));
        assert_eq!(quoted(r#"{"a": "x\\", "b": NaN}"#), r#"{"a": "x\\", "b": "NaN"}"#);
        let parsed: serde_json::Value = serde_json::from_str(&quoted(r#"{"v": -Infinity}"#)).unwrap();
        assert_eq!(parsed["v"], "-Infinity");
    }

    #[test]
    fn metadata_keys_are_known_by_their_file_name() {
        for key in [
            "zarr.json",
            "a/b/zarr.json",
            ".zarray",
            "x/.zattrs",
            ".zgroup",
            ".zmetadata",
        ] {
            assert!(is_metadata_key(key), "{key}");
        }
        for key in ["c/0/0", "0.0", "zarr.jsonx", "a/zarray", "c/zarr.json.tmp"] {
            assert!(!is_metadata_key(key), "{key}");
        }
    }
}
