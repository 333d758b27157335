//! Reading and writing an [`Algorithm`]'s configuration,
//! `{"algorithm": "lz4", "options": {...}}`.
//!
//! kvikio's `NvCompBatchCodec` wrote the same codec id, so its configurations
//! are read too: algorithm names in any case, `algo` for `algorithm` (at the
//! top level and among the options), `type` (nvCOMP's C field) for
//! `data_type`, `null` for nvCOMP's default, and the device options
//! (`device_ordinal`, `device_id`), which do not change the bitstream, are
//! ignored. kvikio's GDeflate buffers are bare nvCOMP streams: a *stored*
//! configuration ([`Algorithm::from_config`]) without `has_header` is read that
//! way, while this project always writes `has_header` out.

use serde_json::{Map, Value};

use super::{Algorithm, DataType};
use crate::error::{Error, Result};

/// Other spellings of options (kvikio's, nvCOMP's C fields) and the option they mean.
const ALIASES: [(&str, &str); 2] = [("algo", "algorithm"), ("type", "data_type")];

/// Options that select the device, not the bitstream: accepted and ignored.
const IGNORED: [&str; 2] = ["device_ordinal", "device_id"];

/// The options the algorithm `name` takes.
fn valid_options(name: &str) -> &'static [&'static str] {
    match name {
        "lz4" => &["data_type", "has_header"],
        "deflate" | "gzip" => &["algorithm"],
        "gdeflate" => &["algorithm", "has_header"],
        "cascaded" | "ans" => &["data_type"],
        "bitcomp" => &["algorithm", "data_type"],
        _ => &[],
    }
}

impl Algorithm {
    /// Builds an algorithm from its name and options (a JSON object or `null`),
    /// for a new codec: options left out take this project's defaults
    /// (GDeflate with zarrs' page header).
    pub fn from_name_and_options(name: &str, options: &Value) -> Result<Self> {
        Self::parse(name, options, Origin::New)
    }

    fn parse(name: &str, options: &Value, origin: Origin) -> Result<Self> {
        let lower = name.to_ascii_lowercase();
        let name: &'static str = Self::NAMES
            .iter()
            .find(|n| **n == lower)
            .ok_or_else(|| Error::UnknownAlgorithm {
                name: name.to_string(),
                valid: &Self::NAMES,
            })?;
        let options = match options {
            Value::Null => Map::new(),
            Value::Object(map) => canonical_options(name, map)?,
            other => return Err(Error::InvalidConfig(format!("options must be an object, got {other}"))),
        };
        let valid = valid_options(name);
        if let Some(unknown) = options.keys().find(|k| !valid.contains(&k.as_str())) {
            return Err(Error::UnknownOption {
                algorithm: name,
                option: unknown.clone(),
                valid,
            });
        }
        let data_type = || {
            options
                .get("data_type")
                .map_or(Ok(DataType::Char), |v| DataType::parse(name, "data_type", v))
        };
        let has_header = |default: bool| {
            options
                .get("has_header")
                .map_or(Ok(default), |v| parse_bool(name, "has_header", v))
        };
        let level = |max: u64| {
            options
                .get("algorithm")
                .map_or(Ok(0), |v| parse_small_int(name, "algorithm", v, max))
        };
        Ok(match name {
            // kvikio's LZ4 wrote numcodecs' length header by default, as this project does.
            "lz4" => Self::Lz4 {
                data_type: data_type()?,
                has_header: has_header(true)?,
            },
            "snappy" => Self::Snappy,
            "zstd" => Self::Zstd,
            "deflate" => Self::Deflate { algorithm: level(5)? },
            "gzip" => Self::Gzip { algorithm: level(5)? },
            "gdeflate" => Self::Gdeflate {
                algorithm: level(5)?,
                has_header: has_header(origin == Origin::New)?,
            },
            "cascaded" => Self::Cascaded {
                data_type: data_type()?,
            },
            "bitcomp" => Self::Bitcomp {
                algorithm: level(1)?,
                data_type: data_type()?,
            },
            "ans" => Self::Ans {
                data_type: data_type()?,
            },
            _ => unreachable!("name comes from NAMES"),
        })
    }

    /// Parses a configuration as zarr metadata stores it,
    /// `{"algorithm": "lz4", "options": {...}}` (an `"id"` key is ignored,
    /// `"algo"` is an alias of `"algorithm"`). It may have been written by
    /// kvikio (see the module docs): a GDeflate configuration without
    /// `has_header` is read as kvikio's bare streams.
    pub fn from_config(config: &Value) -> Result<Self> {
        Self::parse_config(config, Origin::Stored)
    }

    /// Parses the arguments of a new codec, in the form of [`Self::from_config`],
    /// with this project's defaults for options left out, as
    /// [`Self::from_name_and_options`].
    pub fn from_codec_args(config: &Value) -> Result<Self> {
        Self::parse_config(config, Origin::New)
    }

    fn parse_config(config: &Value, origin: Origin) -> Result<Self> {
        let map = config
            .as_object()
            .ok_or_else(|| Error::InvalidConfig(format!("expected an object, got {config}")))?;
        if let Some(key) = map
            .keys()
            .find(|k| !["id", "algorithm", "algo", "options"].contains(&k.as_str()))
        {
            return Err(Error::InvalidConfig(format!(
                "unknown key {key:?}; valid keys: algorithm, options"
            )));
        }
        let name = map
            .get("algorithm")
            .or_else(|| map.get("algo"))
            .ok_or_else(|| Error::InvalidConfig("missing \"algorithm\"".into()))?
            .as_str()
            .ok_or_else(|| Error::InvalidConfig("\"algorithm\" must be a string".into()))?;
        Self::parse(name, map.get("options").unwrap_or(&Value::Null), origin)
    }

    /// The options object, with every option written out.
    pub fn options(&self) -> Value {
        let mut map = Map::new();
        match *self {
            Self::Lz4 { data_type, has_header } => {
                map.insert("data_type".into(), data_type.name().into());
                map.insert("has_header".into(), has_header.into());
            }
            Self::Snappy | Self::Zstd => {}
            Self::Deflate { algorithm } | Self::Gzip { algorithm } => {
                map.insert("algorithm".into(), algorithm.into());
            }
            Self::Gdeflate { algorithm, has_header } => {
                map.insert("algorithm".into(), algorithm.into());
                map.insert("has_header".into(), has_header.into());
            }
            Self::Cascaded { data_type } | Self::Ans { data_type } => {
                map.insert("data_type".into(), data_type.name().into());
            }
            Self::Bitcomp { algorithm, data_type } => {
                map.insert("algorithm".into(), algorithm.into());
                map.insert("data_type".into(), data_type.name().into());
            }
        }
        Value::Object(map)
    }

    /// The configuration `{"algorithm": ..., "options": {...}}`.
    pub fn to_config(&self) -> Value {
        serde_json::json!({ "algorithm": self.name(), "options": self.options() })
    }
}

impl std::str::FromStr for Algorithm {
    type Err = Error;

    /// Parses a bare algorithm name with default options.
    fn from_str(name: &str) -> Result<Self> {
        Self::from_name_and_options(name, &Value::Null)
    }
}

/// Where a configuration comes from, which decides the defaults of options it
/// leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Arguments of a codec being created.
    New,
    /// Stored metadata, which kvikio may have written.
    Stored,
}

/// The options under their canonical names: aliases renamed, device options
/// and `null`s (nvCOMP's default) dropped.
fn canonical_options(algorithm: &'static str, options: &Map<String, Value>) -> Result<Map<String, Value>> {
    let mut canonical = Map::new();
    for (key, value) in options {
        if IGNORED.contains(&key.as_str()) || value.is_null() {
            continue;
        }
        let name = ALIASES
            .iter()
            .find(|(alias, _)| alias == key)
            .map_or(key.as_str(), |(_, name)| name);
        if let Some(earlier) = canonical.insert(name.to_string(), value.clone()) {
            if earlier != *value {
                return Err(Error::InvalidOption {
                    algorithm,
                    option: name.to_string(),
                    reason: format!("given twice with different values, {earlier} and {value} (one through an alias)"),
                });
            }
        }
    }
    Ok(canonical)
}

fn parse_bool(algorithm: &'static str, option: &str, value: &Value) -> Result<bool> {
    value.as_bool().ok_or_else(|| Error::InvalidOption {
        algorithm,
        option: option.into(),
        reason: format!("expected true or false, got {value}"),
    })
}

fn parse_small_int(algorithm: &'static str, option: &str, value: &Value, max: u64) -> Result<u8> {
    value
        .as_u64()
        .filter(|v| *v <= max)
        .map(|v| v as u8)
        .ok_or_else(|| Error::InvalidOption {
            algorithm,
            option: option.into(),
            reason: format!("expected an integer from 0 to {max}, got {value}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_round_trips_for_every_algorithm() {
        for name in Algorithm::NAMES {
            let alg: Algorithm = name.parse().unwrap();
            assert_eq!(alg.name(), name);
            assert_eq!(Algorithm::from_config(&alg.to_config()).unwrap(), alg);
        }
    }

    #[test]
    fn options_are_parsed_and_aliases_accepted() {
        let alg = Algorithm::from_config(&json!({"id": "nvcomp_batch", "algo": "LZ4",
            "options": {"data_type": "uint16", "has_header": false}}))
        .unwrap();
        assert_eq!(
            alg,
            Algorithm::Lz4 {
                data_type: DataType::Ushort,
                has_header: false
            }
        );
        let alg = Algorithm::from_config(&json!({"algorithm": "bitcomp", "options": {"data_type": 5}})).unwrap();
        assert_eq!(
            alg,
            Algorithm::Bitcomp {
                algorithm: 0,
                data_type: DataType::Uint
            }
        );
    }

    #[test]
    fn kvikio_configs_are_read_as_kvikio_wrote_them() {
        // The example: kvikio's `algo` among the options, any case.
        let alg =
            Algorithm::from_config(&json!({"id": "nvcomp_batch", "algorithm": "Gdeflate", "options": {"algo": 1}}))
                .unwrap();
        assert_eq!(
            alg,
            Algorithm::Gdeflate {
                algorithm: 1,
                has_header: false
            }
        );
        // kvikio's defaults: `None` options, no options at all.
        let bare = Algorithm::Gdeflate {
            algorithm: 0,
            has_header: false,
        };
        assert_eq!(
            Algorithm::from_config(&json!({"algorithm": "gdeflate", "options": {"algo": null}})).unwrap(),
            bare
        );
        assert_eq!(
            Algorithm::from_config(&json!({"algorithm": "gdeflate", "options": {}})).unwrap(),
            bare
        );
        assert_eq!(
            Algorithm::from_config(&json!({"algorithm": "Deflate", "options": {"algo": 5}})).unwrap(),
            Algorithm::Deflate { algorithm: 5 }
        );
        // kvikio's LZ4: nvcompType_t integers, the numcodecs header unless told otherwise.
        assert_eq!(
            Algorithm::from_config(&json!({"algorithm": "LZ4", "options": {"data_type": 3}})).unwrap(),
            Algorithm::Lz4 {
                data_type: DataType::Ushort,
                has_header: true
            }
        );
        assert_eq!(
            Algorithm::from_config(
                &json!({"algorithm": "lz4", "options": {"data_type": null, "has_header": false, "device_ordinal": 2}})
            )
            .unwrap(),
            Algorithm::Lz4 {
                data_type: DataType::Char,
                has_header: false
            }
        );
        assert_eq!(
            Algorithm::from_config(&json!({"algorithm": "cascaded", "options": {"type": "uint"}})).unwrap(),
            Algorithm::Cascaded {
                data_type: DataType::Uint
            }
        );
        for name in ["ZSTD", "Snappy"] {
            assert!(Algorithm::from_config(&json!({"algorithm": name, "options": {}})).is_ok());
        }
    }

    #[test]
    fn new_codecs_keep_the_gdeflate_header_and_write_it_out() {
        let new = Algorithm::from_codec_args(&json!({"algorithm": "gdeflate", "options": {"algo": 1}})).unwrap();
        assert_eq!(
            new,
            Algorithm::Gdeflate {
                algorithm: 1,
                has_header: true
            }
        );
        assert_eq!("gdeflate".parse::<Algorithm>().unwrap().options()["has_header"], true);
        // What this project writes is read back unchanged as stored metadata.
        assert_eq!(Algorithm::from_config(&new.to_config()).unwrap(), new);
    }

    #[test]
    fn options_kvikio_never_wrote_are_rejected() {
        for (alg, options) in [
            ("cascaded", json!({"num_RLEs": 1})),
            ("cascaded", json!({"use_bp": true})),
            ("lz4", json!({"chunk_size": 65536})),
            ("zstd", json!({"algo": 1})),
        ] {
            let err = Algorithm::from_config(&json!({"algorithm": alg, "options": options}))
                .unwrap_err()
                .to_string();
            assert!(err.contains("unknown option"), "{err}");
        }
        let err = Algorithm::from_config(&json!({"algorithm": "deflate", "options": {"algo": 1, "algorithm": 2}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("given twice"), "{err}");
    }

    #[test]
    fn bad_configs_name_what_is_valid() {
        let err = "lzma".parse::<Algorithm>().unwrap_err().to_string();
        assert!(err.contains("lzma") && err.contains("gdeflate"), "{err}");
        let err = Algorithm::from_config(&json!({"algorithm": "lz4", "options": {"level": 3}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("level") && err.contains("has_header"), "{err}");
        let err = Algorithm::from_config(&json!({"algorithm": "deflate", "options": {"algorithm": 9}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("0 to 5"), "{err}");
        assert!(Algorithm::from_config(&json!({"algorithm": "lz4", "options": {"data_type": "complex"}})).is_err());
        assert!(Algorithm::from_config(&json!({"options": {}})).is_err());
    }
}
