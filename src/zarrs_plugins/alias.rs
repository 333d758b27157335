//! numcodecs names of codecs that zarrs provides under another name: each
//! alias translates its configuration and creates zarrs' own codec.
//!
//! | metadata | zarrs codec | configuration |
//! |---|---|---|
//! | v3 `numcodecs.zstd` (zarr-python's `numcodecs.zarr3.Zstd`) | `zstd` | `level` (default 0), `checksum` (default false) |
//! | v3 `numcodecs.gzip` | `gzip` | `level` (default 1, numcodecs' `GZip` default) |
//! | v3 `numcodecs.blosc` | `blosc` | numcodecs' `Blosc` configuration, as zarrs reads it in zarr v2, numcodecs' defaults (`clevel` 5, `shuffle` 1, `blocksize` 0) filled in; the shuffle comes from each chunk's header |
//! | v2 `bitround` | `bitround` | `keepbits` |

use serde_json::{json, Map, Value};
use zarrs::array::codec::api::{Codec, CodecPluginV2, CodecPluginV3, CodecTraitsV2, CodecTraitsV3};
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::plugin::PluginCreateError;

/// zarrs' codec `target` from `configuration`, minus any v2 `id`.
fn create_target(target: &str, mut configuration: Map<String, Value>) -> Result<Codec, PluginCreateError> {
    configuration.remove("id");
    Codec::from_metadata(&MetadataV3::new_with_configuration(target, configuration))
}

fn or_default(configuration: &Map<String, Value>, key: &str, default: Value) -> Value {
    configuration.get(key).cloned().unwrap_or(default)
}

/// numcodecs' `Blosc` configuration as zarrs' v3 `blosc` one, numcodecs'
/// defaults filled in (zarr-python leaves them out). Without the element
/// size, the v3 configuration says no shuffle: decoding reads the shuffle
/// from each chunk's header, so this changes nothing when reading (and the
/// alias is for reading). An invalid configuration is passed on as it is,
/// for zarrs' error.
fn numcodecs_blosc_to_v3(configuration: &Map<String, Value>) -> Map<String, Value> {
    use zarrs::metadata_ext::codec::blosc::{codec_blosc_v2_numcodecs_to_v3, BloscCodecConfigurationNumcodecs};
    let mut filled = configuration.clone();
    for (key, default) in [("clevel", json!(5)), ("shuffle", json!(1)), ("blocksize", json!(0))] {
        filled.entry(key).or_insert(default);
    }
    serde_json::from_value::<BloscCodecConfigurationNumcodecs>(Value::Object(filled))
        .ok()
        .and_then(|numcodecs| serde_json::to_value(codec_blosc_v2_numcodecs_to_v3(&numcodecs, None)).ok())
        .and_then(|v3| v3.as_object().cloned())
        .unwrap_or_else(|| configuration.clone())
}

/// Declares an alias type, registered for the versions given.
macro_rules! alias {
    ($codec:ident, $doc:literal, $aliases:tt, $target:literal, |$c:ident| $translate:expr, [$($version:ident),+]) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy)]
        pub struct $codec;

        zarrs::plugin::impl_extension_aliases! $aliases;

        impl $codec {
            fn create_from(configuration: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
                let $c = configuration;
                let translated: Map<String, Value> = $translate;
                create_target($target, translated)
            }
        }

        $(alias!(@register $codec, $version);)+
    };
    (@register $codec:ident, V3) => {
        inventory::submit! {
            CodecPluginV3::new::<$codec>()
        }

        impl CodecTraitsV3 for $codec {
            fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
                Self::create_from(metadata.configuration().map_or(&Map::new(), |c| c))
            }
        }
    };
    (@register $codec:ident, V2) => {
        inventory::submit! {
            CodecPluginV2::new::<$codec>()
        }

        impl CodecTraitsV2 for $codec {
            fn create(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
                Self::create_from(metadata.configuration())
            }
        }
    };
}

alias!(
    NumcodecsZstd,
    "zarr v3 `numcodecs.zstd`, read as zarrs' `zstd`.",
    (NumcodecsZstd, v3: "numcodecs.zstd"),
    "zstd",
    |c| {
        let level = or_default(c, "level", json!(0));
        let checksum = or_default(c, "checksum", json!(false));
        Map::from_iter([("level".into(), level), ("checksum".into(), checksum)])
    },
    [V3]
);

alias!(
    NumcodecsGzip,
    "zarr v3 `numcodecs.gzip`, read as zarrs' `gzip`.",
    (NumcodecsGzip, v3: "numcodecs.gzip"),
    "gzip",
    |c| Map::from_iter([("level".into(), or_default(c, "level", json!(1)))]),
    [V3]
);

alias!(
    NumcodecsBlosc,
    "zarr v3 `numcodecs.blosc`, read as zarrs' `blosc`.",
    (NumcodecsBlosc, v3: "numcodecs.blosc"),
    "blosc",
    |c| numcodecs_blosc_to_v3(c),
    [V3]
);

alias!(
    BitroundV2,
    "zarr v2 `bitround` filter, read as zarrs' `bitround`.",
    (BitroundV2, v2: "bitround"),
    "bitround",
    |c| c.clone(),
    [V2]
);
