//! kerchunk reference sets: every key of a zarr store mapped to its bytes,
//! given inline or as a byte range of another file (a NetCDF4/HDF5 file,
//! a GRIB or TIFF file, another store's object).
//!
//! Two forms of JSON, as kerchunk writes them (its "Reference specification"):
//!
//! ```text
//! version 0:  { key: value, ... }
//! version 1:  { "version": 1, "templates": { name: text, ... },
//!               "gen": [ ... ], "refs": { key: value, ... } }
//! ```
//!
//! A value is one of:
//!
//! | value | the key's bytes |
//! |---|---|
//! | `"text"` | the text's UTF-8 bytes (metadata documents: `.zarray`, `zarr.json`) |
//! | `"base64:..."` | the base64 text decoded |
//! | a JSON object | its JSON text (some writers inline metadata so) |
//! | `[url]` | the whole object at `url` |
//! | `[url, offset, length]` | `length` bytes of the object at `url` from `offset` |
//!
//! In version 1, `{{name}}` in a URL is replaced by the template `name`, and
//! `gen` entries (references made by templates over ranges) are expanded
//! ([`crate::array::store::reference_gen`]). A key absent from the set is a
//! missing object (a chunk that reads as the fill value).

use std::collections::HashMap;
use std::ops::Range;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Map, Value};

/// Where a key's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reference {
    /// Given in the set.
    Inline(Bytes),
    /// Bytes of the object at `url`: all of it, or `range`.
    Range { url: String, range: Option<Range<u64>> },
}

/// A reference set: each key's [`Reference`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct References {
    pub(crate) refs: HashMap<String, Reference>,
}

impl References {
    /// The reference set of the JSON text `json`; the reason where it is
    /// not one this module reads.
    pub(crate) fn parse(json: &[u8]) -> Result<Self, String> {
        let top: Value = serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(mut top) = top else {
            return Err("not a JSON object".into());
        };
        let (refs, templates, gens) = match top.get("version") {
            None => (top, Map::new(), Vec::new()),
            Some(Value::Number(v)) if v.as_u64() == Some(1) => {
                let gens = match top.remove("gen") {
                    Some(Value::Array(gens)) => gens,
                    None | Some(Value::Null) => Vec::new(),
                    Some(_) => return Err("\"gen\" is not a list".into()),
                };
                let refs = match top.remove("refs") {
                    Some(Value::Object(refs)) => refs,
                    None => Map::new(),
                    Some(_) => return Err("\"refs\" is not an object".into()),
                };
                let templates = match top.remove("templates") {
                    Some(Value::Object(templates)) => templates,
                    None => Map::new(),
                    Some(_) => return Err("\"templates\" is not an object".into()),
                };
                (refs, templates, gens)
            }
            Some(other) => {
                return Err(format!(
                    "version {other} is not a reference set version this reads (0 or 1)"
                ))
            }
        };
        let templates: HashMap<String, String> = templates
            .into_iter()
            .map(|(name, text)| match text {
                Value::String(text) => Ok((name, text)),
                _ => Err(format!("template {name:?} is not a string")),
            })
            .collect::<Result<_, String>>()?;
        // Generated references last: they replace a key `refs` gives too, as
        // fsspec's expansion did.
        let generated = crate::array::store::reference_gen::expand(&gens, &templates)?;
        let refs = refs
            .into_iter()
            .chain(generated)
            .map(|(key, value)| {
                let reference = reference(value, &templates).map_err(|why| format!("key {key:?}: {why}"))?;
                Ok((key, reference))
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { refs })
    }

    /// The reference of `key`, `None` where the set has none.
    pub(crate) fn get(&self, key: &str) -> Option<&Reference> {
        self.refs.get(key)
    }

    /// The URLs the set's ranges read from, each once.
    pub(crate) fn urls(&self) -> impl Iterator<Item = &str> {
        let mut urls: Vec<&str> = self
            .refs
            .values()
            .filter_map(|r| match r {
                Reference::Range { url, .. } => Some(url.as_str()),
                Reference::Inline(_) => None,
            })
            .collect();
        urls.sort_unstable();
        urls.dedup();
        urls.into_iter()
    }
}

/// The [`Reference`] a value of the set gives, its URL's templates
/// replaced.
fn reference(value: Value, templates: &HashMap<String, String>) -> Result<Reference, String> {
    match value {
        Value::String(text) => Ok(Reference::Inline(match text.strip_prefix("base64:") {
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("bad base64: {e}"))?
                .into(),
            None => Bytes::from(text.into_bytes()),
        })),
        Value::Object(_) => Ok(Reference::Inline(value.to_string().into())),
        Value::Array(parts) => {
            let url = match parts.first() {
                Some(Value::String(url)) => with_templates(url, templates)?,
                _ => return Err("a reference's first item is not a URL".into()),
            };
            let number = |i: usize, what: &str| {
                parts[i]
                    .as_u64()
                    .ok_or_else(|| format!("its {what} is not a non-negative integer"))
            };
            let range = match parts.len() {
                1 => None,
                3 => {
                    let (offset, length) = (number(1, "offset")?, number(2, "length")?);
                    let end = offset.checked_add(length).ok_or("its offset and length overflow")?;
                    Some(offset..end)
                }
                n => return Err(format!("a reference of {n} items: [url] or [url, offset, length]")),
            };
            Ok(Reference::Range { url, range })
        }
        other => Err(format!("not a reference: {other}")),
    }
}

/// `url` with each `{{name}}` replaced by the template `name`.
fn with_templates(url: &str, templates: &HashMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(start) = rest.find("{{") {
        let end = rest[start..]
            .find("}}")
            .ok_or_else(|| format!("an unclosed template in {url:?}"))?;
        let name = rest[start + 2..start + end].trim();
        let text = templates
            .get(name)
            .ok_or_else(|| format!("no template {name:?} for {url:?}"))?;
        out.push_str(&rest[..start]);
        out.push_str(text);
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_and_every_kind_of_value_are_read() {
        let v0 = br#"{".zgroup": "{\"zarr_format\": 2}",
                      "a/.zarray": {"zarr_format": 2},
                      "a/0.0": "base64:AAEC",
                      "a/0.1": ["/data/f.nc", 100, 20],
                      "a/1.0": ["s3://b/f.nc"]}"#;
        let refs = References::parse(v0).unwrap();
        assert_eq!(
            refs.get(".zgroup"),
            Some(&Reference::Inline(r#"{"zarr_format": 2}"#.into()))
        );
        assert_eq!(
            refs.get("a/.zarray"),
            Some(&Reference::Inline(r#"{"zarr_format":2}"#.into()))
        );
        assert_eq!(refs.get("a/0.0"), Some(&Reference::Inline(vec![0u8, 1, 2].into())));
        let range = |url: &str, range| Reference::Range { url: url.into(), range };
        assert_eq!(refs.get("a/0.1"), Some(&range("/data/f.nc", Some(100..120))));
        assert_eq!(refs.get("a/1.0"), Some(&range("s3://b/f.nc", None)));
        assert_eq!(refs.get("a/1.1"), None);
        assert_eq!(refs.urls().collect::<Vec<_>>(), ["/data/f.nc", "s3://b/f.nc"]);
        let v1 = br#"{"version": 1, "templates": {"u": "s3://bucket/run", "n": "7"},
                      "refs": {"x/0": ["{{u}}/file{{ n }}.nc", 0, 8], "x/1": "raw"}}"#;
        let refs = References::parse(v1).unwrap();
        assert_eq!(refs.get("x/0"), Some(&range("s3://bucket/run/file7.nc", Some(0..8))));
        assert_eq!(refs.get("x/1"), Some(&Reference::Inline("raw".into())));
    }

    #[test]
    fn sets_this_does_not_read_are_refused_with_the_reason() {
        let refused = |json: &str, why: &str| {
            let err = References::parse(json.as_bytes()).unwrap_err();
            assert!(err.contains(why), "{json}: {err}");
        };
        refused("[1, 2]", "not a JSON object");
        refused("{", "not JSON");
        refused(r#"{"version": 2, "refs": {}}"#, "version 2");
        refused(
            r#"{"version": 1, "gen": [{"key": "a/{{i}}", "url": "u"}], "refs": {}}"#,
            "gen entry 0: needs \"dimensions\"",
        );
        refused(r#"{"version": 1, "gen": {}, "refs": {}}"#, "\"gen\" is not a list");
        refused(r#"{"a": ["u", 1]}"#, "a reference of 2 items");
        refused(r#"{"a": ["u", -1, 2]}"#, "offset is not a non-negative integer");
        refused(r#"{"a": ["u", 18446744073709551615, 2]}"#, "overflow");
        refused(r#"{"a": [3]}"#, "first item is not a URL");
        refused(r#"{"a": "base64:@@"}"#, "bad base64");
        refused(r#"{"a": 5}"#, "not a reference");
        refused(
            r#"{"version": 1, "refs": {"a": ["{{u}}/f", 0, 1]}}"#,
            "no template \"u\"",
        );
        refused(
            r#"{"version": 1, "templates": {"u": "x"}, "refs": {"a": ["{{u/f", 0, 1]}}"#,
            "unclosed template",
        );
        // An empty `gen` list is no generator.
        assert!(References::parse(br#"{"version": 1, "gen": [], "refs": {}}"#).is_ok());
    }

    #[test]
    fn generated_references_join_the_set_and_replace_the_same_keys() {
        let set = br#"{"version": 1, "templates": {"u": "s3://b"},
            "gen": [{"key": "c/{{i}}", "url": "{{u}}/f.nc", "offset": "{{i * 8}}", "length": "8",
                     "dimensions": {"i": {"stop": 3}}}],
            "refs": {"c/1": "base64:AAAA", "c/9": ["s3://b/g.nc", 0, 4]}}"#;
        let refs = References::parse(set).unwrap();
        let range = |url: &str, r: std::ops::Range<u64>| Reference::Range {
            url: url.into(),
            range: Some(r),
        };
        assert_eq!(refs.get("c/0"), Some(&range("s3://b/f.nc", 0..8)));
        assert_eq!(refs.get("c/1"), Some(&range("s3://b/f.nc", 8..16)));
        assert_eq!(refs.get("c/2"), Some(&range("s3://b/f.nc", 16..24)));
        assert_eq!(refs.get("c/9"), Some(&range("s3://b/g.nc", 0..4)));
        assert_eq!(refs.refs.len(), 4);
    }
}
