//! zarr-python's fixed-size data types that zarrs lacks, registered with
//! zarrs (through `inventory`, wherever this crate is linked), so that arrays
//! zarr-python writes with them open and read:
//!
//! | NumPy | zarr v3 | zarr v2 | here |
//! |---|---|---|---|
//! | `S<n>` | `null_terminated_bytes` | `\|S<n>` | [`NullTerminatedBytesDataType`] |
//! | `V<n>` | `raw_bytes` | `\|V<n>` (zarrs' `r<8n>`) | [`RawBytesDataType`] (v3) |
//! | `M8[<k><unit>]`, `m8[...]` | zarrs' `numpy.datetime64`, `numpy.timedelta64` | `<M8[...]`, `<m8[...]` | their v2 names |
//!
//! Their elements are bytes as they are: they go through the `bytes` codec
//! untouched.

use std::num::NonZeroU32;
use std::sync::Arc;

use base64::prelude::BASE64_STANDARD;
use base64::Engine as _;
use zarrs::array::data_type::{NumpyDateTime64DataType, NumpyTimeDelta64DataType, NumpyTimeUnit};
use zarrs::metadata::v2::DataTypeMetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::{Configuration, DataTypeSize, FillValueMetadata};
use zarrs::plugin::{PluginCreateError, Regex, ZarrVersion};
use zarrs_data_type::{
    DataType, DataTypeFillValueError, DataTypeFillValueMetadataError, DataTypePluginV2, DataTypePluginV3,
    DataTypeTraits, DataTypeTraitsV2, DataTypeTraitsV3, FillValue,
};

/// The `length_bytes` of a v3 configuration.
fn length_bytes(metadata: &MetadataV3) -> Result<usize, PluginCreateError> {
    metadata
        .configuration()
        .and_then(|c| c.get("length_bytes"))
        .and_then(serde_json::Value::as_u64)
        .filter(|&n| n > 0)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| PluginCreateError::Other(format!("{} needs a positive length_bytes", metadata.name())))
}

fn length_configuration(length: usize) -> Configuration {
    serde_json::Map::from_iter([("length_bytes".to_string(), length.into())]).into()
}

/// A fill value given as base64 (zarr-python's encoding for these types),
/// `null` (v2: zeros), or an array of byte values; padded with zeros to
/// `length` bytes where `pad`, otherwise exactly `length` bytes.
fn bytes_fill_value(
    metadata: &FillValueMetadata,
    length: usize,
    pad: bool,
) -> Result<FillValue, DataTypeFillValueMetadataError> {
    let mut bytes = if metadata.is_null() {
        Vec::new()
    } else if let Some(text) = metadata.as_str() {
        BASE64_STANDARD
            .decode(text)
            .map_err(|_| DataTypeFillValueMetadataError)?
    } else {
        serde_json::to_value(metadata)
            .ok()
            .and_then(|v| serde_json::from_value::<Vec<u8>>(v).ok())
            .ok_or(DataTypeFillValueMetadataError)?
    };
    if bytes.len() > length || (!pad && !metadata.is_null() && bytes.len() != length) {
        return Err(DataTypeFillValueMetadataError);
    }
    bytes.resize(length, 0);
    Ok(FillValue::from(bytes))
}

/// Defines a data type of `length_bytes` opaque bytes, named `$v3` in zarr v3.
macro_rules! fixed_bytes_data_type {
    ($(#[$doc:meta])* $type:ident, v3: $v3:literal, v2: [$($v2_regex:literal)?], pad: $pad:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $type {
            length_bytes: usize,
        }

        impl $type {
            /// The type of elements of `length_bytes` bytes.
            pub fn new(length_bytes: usize) -> Self {
                Self { length_bytes }
            }

            /// Bytes of one element.
            pub fn length_bytes(&self) -> usize {
                self.length_bytes
            }
        }

        zarrs::plugin::impl_extension_aliases!($type,
            v3: $v3, [], [],
            v2: "", [], [$(Regex::new($v2_regex).expect("valid regex"))?]
        );

        impl DataTypeTraitsV3 for $type {
            fn create(metadata: &MetadataV3) -> Result<DataType, PluginCreateError> {
                Ok(Arc::new(Self::new(length_bytes(metadata)?)).into())
            }
        }

        inventory::submit! {
            DataTypePluginV3::new::<$type>()
        }

        impl DataTypeTraits for $type {
            fn configuration(&self, _version: ZarrVersion) -> Configuration {
                length_configuration(self.length_bytes)
            }

            fn size(&self) -> DataTypeSize {
                DataTypeSize::Fixed(self.length_bytes)
            }

            fn fill_value(
                &self,
                fill_value_metadata: &FillValueMetadata,
                _version: ZarrVersion,
            ) -> Result<FillValue, DataTypeFillValueMetadataError> {
                bytes_fill_value(fill_value_metadata, self.length_bytes, $pad)
            }

            fn metadata_fill_value(&self, fill_value: &FillValue) -> Result<FillValueMetadata, DataTypeFillValueError> {
                let bytes = fill_value.as_ne_bytes();
                if bytes.len() != self.length_bytes {
                    return Err(DataTypeFillValueError);
                }
                Ok(FillValueMetadata::from(BASE64_STANDARD.encode(bytes)))
            }

            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
        }

        zarrs_data_type::codec_traits::impl_bytes_data_type_traits!($type, 1);
    };
}

fixed_bytes_data_type!(
    /// NumPy's `S<n>`: `n` bytes, shorter values padded with zeros
    /// (zarr v3 `null_terminated_bytes`, v2 `|S<n>`).
    NullTerminatedBytesDataType, v3: "null_terminated_bytes", v2: [r"^\|S\d+$"], pad: true
);

fixed_bytes_data_type!(
    /// NumPy's `V<n>` in zarr v3 (`raw_bytes`): `n` opaque bytes. (zarr v2's
    /// `|V<n>` is zarrs' own raw bits type.)
    RawBytesDataType, v3: "raw_bytes", v2: [], pad: false
);

impl DataTypeTraitsV2 for NullTerminatedBytesDataType {
    fn create(metadata: &DataTypeMetadataV2) -> Result<DataType, PluginCreateError> {
        let DataTypeMetadataV2::Simple(name) = metadata else {
            return Err(PluginCreateError::Other("|S<n> is not a structured data type".into()));
        };
        let length = name[2..]
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| PluginCreateError::NameInvalid { name: name.clone() })?;
        Ok(Arc::new(Self::new(length)).into())
    }
}

inventory::submit! {
    DataTypePluginV2::new::<NullTerminatedBytesDataType>()
}

/// zarr v2's `<M8[<k><unit>]` and `<m8[...]`, which zarrs defines in v3 only:
/// creates zarrs' `numpy.datetime64` and `numpy.timedelta64` types.
#[derive(Debug)]
pub struct NumpyTimeV2;

zarrs::plugin::impl_extension_aliases!(NumpyTimeV2,
    v2: "", [], [Regex::new(r"^[<>|]?[Mm]8(\[\d*(Y|M|W|D|h|m|s|ms|us|μs|ns|ps|fs|as)\])?$").expect("valid regex")]
);

impl DataTypeTraitsV2 for NumpyTimeV2 {
    fn create(metadata: &DataTypeMetadataV2) -> Result<DataType, PluginCreateError> {
        let invalid = || PluginCreateError::Other(format!("{metadata:?} is not a NumPy datetime64/timedelta64 type"));
        let DataTypeMetadataV2::Simple(name) = metadata else {
            return Err(invalid());
        };
        let name = name.trim_start_matches(['<', '>', '|']);
        let (kind, unit) = name.split_at(1);
        let (scale, unit) = match unit.strip_prefix("8[").and_then(|u| u.strip_suffix(']')) {
            Some(unit) => {
                let digits = unit.find(|c: char| !c.is_ascii_digit()).unwrap_or(unit.len());
                (&unit[..digits], &unit[digits..])
            }
            None => ("", "generic"),
        };
        let unit: NumpyTimeUnit = serde_json::from_value(unit.into()).map_err(|_| invalid())?;
        let scale_factor = if scale.is_empty() {
            NonZeroU32::MIN
        } else {
            scale.parse().map_err(|_| invalid())?
        };
        match kind {
            "M" => Ok(Arc::new(NumpyDateTime64DataType::new(unit, scale_factor)).into()),
            _ => Ok(Arc::new(NumpyTimeDelta64DataType::new(unit, scale_factor)).into()),
        }
    }
}

inventory::submit! {
    DataTypePluginV2::new::<NumpyTimeV2>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_values_decode_from_base64() {
        let fill = |json: serde_json::Value, pad| {
            let metadata: FillValueMetadata = serde_json::from_value(json).unwrap();
            bytes_fill_value(&metadata, 3, pad).map(|f| f.as_ne_bytes().to_vec())
        };
        assert_eq!(fill("YWI=".into(), true).unwrap(), b"ab\0");
        assert_eq!(fill("".into(), true).unwrap(), [0, 0, 0]);
        assert_eq!(fill("AAAA".into(), false).unwrap(), [0, 0, 0]);
        assert!(fill("YWI=".into(), false).is_err());
        assert!(fill("YWJjZA==".into(), true).is_err());
        assert!(fill("not base64!".into(), true).is_err());
        assert_eq!(fill(serde_json::json!([1, 2, 3]), false).unwrap(), [1, 2, 3]);
    }

    #[test]
    fn v2_time_types_parse_their_unit_and_scale() {
        let create = |name: &str| NumpyTimeV2::create(&DataTypeMetadataV2::Simple(name.into()));
        let dt = create("<M8[10ms]").unwrap();
        let dt = dt.as_any().downcast_ref::<NumpyDateTime64DataType>().unwrap();
        assert_eq!((dt.unit, dt.scale_factor.get()), (NumpyTimeUnit::Millisecond, 10));
        let td = create("<m8[Y]").unwrap();
        let td = td.as_any().downcast_ref::<NumpyTimeDelta64DataType>().unwrap();
        assert_eq!((td.unit, td.scale_factor.get()), (NumpyTimeUnit::Year, 1));
        assert!(create("<M8[xs]").is_err());
    }
}
