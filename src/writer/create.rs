//! Creates a zarr array: its metadata (v2 `.zarray` or v3 `zarr.json`) in a
//! store, from a shape, chunk (and shard) shape, data type, fill value and
//! compressor.
//!
//! | [`NewArray`] field | v3 `zarr.json` | v2 `.zarray` |
//! |---|---|---|
//! | `shape` | `shape` | `shape` |
//! | `chunks` | `chunk_grid` (or the sharding codec's inner `chunk_shape`) | `chunks` |
//! | `shards` | `chunk_grid`, one `sharding_indexed` codec (index at the end, `bytes` + `crc32c`) | an error |
//! | `data_type` (v3 name) | `data_type` | `dtype`, little endian (`<f4`, `|u1`, ...) |
//! | `fill_value` | `fill_value` | `fill_value` |
//! | `compressor` (v3 codec metadata) | `bytes` (little endian), the compressor | `compressor` in numcodecs' form |
//!
//! v3 chunk keys are `c/i/j` (`/` separated), v2 keys `i.j`. An array or
//! group already at that place is an error, unless [`NewArray::overwrite`]
//! (then everything there is removed first). Nothing is written unless the
//! metadata passes [`probe`]'s checks.

use std::collections::HashMap;

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use serde_json::{json, Map, Value};

use super::{existing, file_store, probe, WriteError};
use crate::array::error::ReadError;
use crate::array::runtime::runtime;
use crate::array::store::open::open_array;
use crate::array::store::{local_dir, open_store};
use crate::array::ObjectStoreArray;

/// The description of a new array.
#[derive(Debug, Clone, PartialEq)]
pub struct NewArray {
    /// The array's shape.
    pub shape: Vec<u64>,
    /// The shape of a chunk (of an inner chunk for sharded arrays).
    pub chunks: Vec<u64>,
    /// The shape of a shard, a multiple of `chunks`; `None`: not sharded.
    pub shards: Option<Vec<u64>>,
    /// The zarr v3 name of the data type: `bool`, `int8` ... `uint64`,
    /// `float16`, `float32`, `float64`, `complex64`, `complex128`.
    pub data_type: String,
    /// The fill value as zarr writes it: a number, a boolean, `"NaN"`,
    /// `"Infinity"` or `"-Infinity"`.
    pub fill_value: Value,
    /// The compressor as zarr v3 codec metadata, e.g.
    /// `{"name": "zstd", "configuration": {"level": 1, "checksum": false}}`,
    /// `{"name": "numcodecs.lz4"}` or `{"name": "nvcomp_batch", "configuration":
    /// {"algorithm": "lz4", "options": {}}}`; `None`: uncompressed.
    pub compressor: Option<Value>,
    /// 2 or 3.
    pub zarr_format: u8,
    /// User attributes: a v3 `zarr.json`'s `attributes`, a v2 array's
    /// `.zattrs` (stored after the `.zarray`, where there are any).
    pub attributes: Map<String, Value>,
    /// The names of the dimensions (zarr v3 only), `None` for an unnamed
    /// one; `None`: no names.
    pub dimension_names: Option<Vec<Option<String>>>,
    /// Filters before the compressor, as zarr v3 codec metadata in the
    /// order they encode (`{"name": "numcodecs.delta", "configuration":
    /// {"dtype": "<i4"}}`, `{"name": "transpose", ...}`): in a v3 chain
    /// before `bytes` (inside the shards of a sharded array), in a v2
    /// array's `filters` as numcodecs configurations.
    pub filters: Vec<Value>,
    /// Whether whatever is at the place is removed first (metadata first,
    /// then every chunk and other object under it), as zarr's `overwrite`;
    /// otherwise an array or group there is [`WriteError::Exists`].
    pub overwrite: bool,
}

/// The v2 `dtype` of a v3 data type name (little endian).
fn v2_dtype(name: &str) -> Option<&'static str> {
    Some(match name {
        "bool" => "|b1",
        "int8" => "|i1",
        "uint8" => "|u1",
        "int16" => "<i2",
        "uint16" => "<u2",
        "int32" => "<i4",
        "uint32" => "<u4",
        "int64" => "<i8",
        "uint64" => "<u8",
        "float16" => "<f2",
        "float32" => "<f4",
        "float64" => "<f8",
        "complex64" => "<c8",
        "complex128" => "<c16",
        _ => return None,
    })
}

/// `(name, configuration)` of v3 codec metadata.
fn named(codec: &Value) -> Result<(&str, Map<String, Value>), WriteError> {
    let config = |reason: String| WriteError::Config { reason };
    let name = codec
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| config(format!("codec {codec} has no \"name\"")))?;
    let configuration = match codec.get("configuration") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => return Err(config(format!("codec configuration {other} is not an object"))),
    };
    Ok((name, configuration))
}

/// `codec` (zarr v3 metadata of a numcodecs codec) as a v2 numcodecs
/// configuration: its configuration and its `id`.
fn v2_codec(codec: &Value) -> Result<Value, WriteError> {
    let (name, mut configuration) = named(codec)?;
    let id = name.strip_prefix("numcodecs.").unwrap_or(name);
    configuration.insert("id".into(), json!(id));
    Ok(Value::Object(configuration))
}

impl NewArray {
    /// The metadata document: its store key and its JSON.
    pub fn metadata(&self) -> Result<(&'static str, Value), WriteError> {
        let config = |reason: String| WriteError::Config { reason };
        if self.chunks.len() != self.shape.len() || self.chunks.contains(&0) {
            return Err(config(format!(
                "chunks {:?} must give a positive length for each of the {} dimensions",
                self.chunks,
                self.shape.len()
            )));
        }
        let dtype = v2_dtype(&self.data_type).ok_or_else(|| {
            config(format!(
                "data type {:?} cannot be created; numbers and bool can",
                self.data_type
            ))
        })?;
        if let Some(names) = &self.dimension_names {
            if self.zarr_format == 2 {
                return Err(config("zarr v2 arrays have no dimension names".into()));
            }
            if names.len() != self.shape.len() {
                return Err(config(format!(
                    "dimension_names {names:?} must name each of the {} dimensions",
                    self.shape.len()
                )));
            }
        }
        match self.zarr_format {
            2 => {
                if self.shards.is_some() {
                    return Err(config("zarr v2 arrays cannot be sharded".into()));
                }
                let compressor = match &self.compressor {
                    None => Value::Null,
                    Some(codec) => v2_codec(codec)?,
                };
                let filters = if self.filters.is_empty() {
                    Value::Null
                } else {
                    Value::Array(self.filters.iter().map(v2_codec).collect::<Result<_, _>>()?)
                };
                Ok((
                    ".zarray",
                    json!({
                        "zarr_format": 2,
                        "shape": self.shape,
                        "chunks": self.chunks,
                        "dtype": dtype,
                        "compressor": compressor,
                        "fill_value": self.fill_value,
                        "order": "C",
                        "filters": filters,
                        "dimension_separator": ".",
                    }),
                ))
            }
            3 => {
                let mut codecs = self
                    .filters
                    .iter()
                    .map(|filter| {
                        named(filter).map(|(name, configuration)| json!({"name": name, "configuration": configuration}))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                codecs.push(json!({"name": "bytes", "configuration": {"endian": "little"}}));
                if let Some(codec) = &self.compressor {
                    let (name, configuration) = named(codec)?;
                    codecs.push(json!({"name": name, "configuration": configuration}));
                }
                let (grid, codecs) = match &self.shards {
                    None => (&self.chunks, codecs),
                    Some(shards) => {
                        let divides = shards.len() == self.chunks.len()
                            && shards.iter().zip(&self.chunks).all(|(s, c)| *s > 0 && s % c == 0);
                        if !divides {
                            return Err(config(format!(
                                "shards {shards:?} must be multiples of chunks {:?}",
                                self.chunks
                            )));
                        }
                        let sharding = json!({
                            "name": "sharding_indexed",
                            "configuration": {
                                "chunk_shape": self.chunks,
                                "codecs": codecs,
                                "index_codecs": [
                                    {"name": "bytes", "configuration": {"endian": "little"}},
                                    {"name": "crc32c"},
                                ],
                                "index_location": "end",
                            },
                        });
                        (shards, vec![sharding])
                    }
                };
                let mut document = json!({
                    "zarr_format": 3,
                    "node_type": "array",
                    "shape": self.shape,
                    "data_type": self.data_type,
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
                    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                    "fill_value": self.fill_value,
                    "codecs": codecs,
                    "attributes": self.attributes,
                });
                if let Some(names) = &self.dimension_names {
                    document["dimension_names"] = json!(names);
                }
                Ok(("zarr.json", document))
            }
            other => Err(config(format!("zarr_format must be 2 or 3, not {other}"))),
        }
    }

    /// The document that holds the attributes where the metadata does not:
    /// a v2 array's `.zattrs`, where there are any.
    fn attributes_document(&self) -> Option<(&'static str, Value)> {
        (self.zarr_format == 2 && !self.attributes.is_empty()).then(|| (".zattrs", json!(self.attributes)))
    }
}

/// Creates the array `new` at `url` (see [`store`](crate::array::store) for URLs
/// and `storage_options`) and opens it. Local directories are created.
///
/// All or nothing: the metadata is checked first (zarrs opens it, and one
/// element goes through its codecs and back; an algorithm that only a GPU
/// runs needs a usable GPU), and on any error nothing is written and the
/// directories made for the array are removed again. Of several creators
/// of one new array, exactly one succeeds; the others get
/// [`WriteError::Exists`]: the metadata document is stored only where none
/// is (a hard link on local files, `If-None-Match: *` on S3).
pub async fn create_array(
    url: &str,
    new: &NewArray,
    storage_options: &HashMap<String, String>,
) -> Result<ObjectStoreArray, WriteError> {
    let (key, metadata) = new.metadata()?;
    probe::check(new)?;
    let mut made = Vec::new();
    let created = async {
        if let Some(dir) = local_dir(url) {
            let path = dir.map_err(|e| ReadError::InvalidUrl {
                url: url.to_string(),
                source: e.into(),
            })?;
            file_store::make_dir(&path, &mut made).map_err(|source| WriteError::CreateDir {
                key: key.into(),
                path,
                source,
            })?;
        }
        let objects = open_store(url, storage_options)?;
        existing::clear(&objects, url, new.overwrite).await?;
        let text = serde_json::to_vec_pretty(&metadata).expect("metadata serialises");
        existing::put_metadata(&objects, url, key, text, new.overwrite).await?;
        if let Some((attributes_key, document)) = new.attributes_document() {
            let text = serde_json::to_vec_pretty(&document).expect("attributes serialise");
            objects
                .put(&Path::from(attributes_key), PutPayload::from(text))
                .await
                .map_err(|e| WriteError::Store {
                    key: attributes_key.into(),
                    source: e.into(),
                })?;
        }
        Ok(open_array(url, storage_options).await?)
    }
    .await;
    if created.is_err() {
        // Deepest first; a directory that holds anything stays.
        for dir in made.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    created
}

/// [`create_array`] on the reader's shared runtime; must not be called from
/// within a tokio runtime.
pub fn create_array_blocking(
    url: &str,
    new: &NewArray,
    storage_options: &HashMap<String, String>,
) -> Result<ObjectStoreArray, WriteError> {
    runtime().block_on(create_array(url, new, storage_options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(zarr_format: u8, shards: Option<Vec<u64>>) -> NewArray {
        NewArray {
            shape: vec![10, 20],
            chunks: vec![5, 10],
            shards,
            data_type: "float32".into(),
            fill_value: json!("NaN"),
            compressor: Some(json!({"name": "numcodecs.zlib", "configuration": {"level": 1}})),
            zarr_format,
            overwrite: false,
            attributes: serde_json::Map::new(),
            dimension_names: None,
            filters: Vec::new(),
        }
    }

    #[test]
    fn v2_metadata_uses_numcodecs_ids_and_little_endian_dtypes() {
        let (key, meta) = new(2, None).metadata().unwrap();
        assert_eq!(key, ".zarray");
        assert_eq!(meta["dtype"], "<f4");
        assert_eq!(meta["compressor"], json!({"id": "zlib", "level": 1}));
        assert_eq!(meta["fill_value"], "NaN");
        assert!(new(2, Some(vec![10, 20])).metadata().is_err());
    }

    #[test]
    fn v3_shards_wrap_the_chain_in_one_sharding_codec() {
        let (key, meta) = new(3, Some(vec![10, 20])).metadata().unwrap();
        assert_eq!(key, "zarr.json");
        assert_eq!(meta["chunk_grid"]["configuration"]["chunk_shape"], json!([10, 20]));
        let sharding = &meta["codecs"][0];
        assert_eq!(sharding["name"], "sharding_indexed");
        assert_eq!(sharding["configuration"]["chunk_shape"], json!([5, 10]));
        assert_eq!(sharding["configuration"]["codecs"][1]["name"], "numcodecs.zlib");
        assert!(new(3, Some(vec![7, 20])).metadata().is_err());
    }
}
