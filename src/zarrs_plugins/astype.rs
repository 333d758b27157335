//! numcodecs `astype`: elements stored converted to another numeric type.
//!
//! # Metadata
//!
//! Zarr v2 filter `{"id": "astype", "encode_dtype": "<i2", "decode_dtype": "<f8"}`,
//! zarr v3 `{"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i2", "decode_dtype": "<f8"}}`.
//!
//! - `decode_dtype` (required): the array's data type.
//! - `encode_dtype` (required): the stored data type.
//!
//! # Encoded chunk
//!
//! Each element converted to `encode_dtype` as NumPy's `astype` converts it
//! (integers wrap, floats round to nearest, floats to integers truncate);
//! decoding converts back to `decode_dtype` the same way.

use serde::{Deserialize, Serialize};
use zarrs::array::DataType;

use super::filter::{impl_filter_codec, parse_configuration, Filter};
use super::numeric::{Conversion, Numeric};

/// The numcodecs `astype` filter (see the [module documentation](self)).
#[derive(Debug, Clone, Serialize)]
pub struct AsTypeCodec {
    #[serde(flatten)]
    configuration: AsTypeConfiguration,
    /// `decode_dtype` stored as `encode_dtype`.
    #[serde(skip)]
    types: Conversion,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AsTypeConfiguration {
    encode_dtype: String,
    decode_dtype: String,
}

zarrs::plugin::impl_extension_aliases!(AsTypeCodec, v3: "numcodecs.astype", v2: "astype");
impl_filter_codec!(AsTypeCodec);

impl Filter for AsTypeCodec {
    const NAME: &'static str = "numcodecs.astype";
    const KEEPS_SHAPE: bool = true;

    fn from_configuration(configuration: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let configuration: AsTypeConfiguration = parse_configuration(configuration)?;
        let types = Conversion {
            astype: Numeric::parse(&configuration.encode_dtype)?,
            dtype: Numeric::parse(&configuration.decode_dtype)?,
        };
        Ok(Self { configuration, types })
    }

    fn encoded_data_type(&self, decoded: &DataType) -> Result<DataType, String> {
        self.types.encoded_data_type(decoded)
    }

    fn encode(&self, decoded: &[u8], data_type: &DataType) -> Result<Vec<u8>, String> {
        self.types.store(decoded, data_type)
    }

    fn decode(&self, encoded: &[u8], data_type: &DataType, elements: u64) -> Result<Vec<u8>, String> {
        self.types.load(encoded, data_type, elements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_both_ways() {
        let json = serde_json::json!({"id": "astype", "encode_dtype": "<i2", "decode_dtype": "<f8"});
        let codec = AsTypeCodec::from_configuration(json.as_object().unwrap()).unwrap();
        let float64 = zarrs::array::data_type::float64();
        let data: Vec<u8> = [3.0f64, -7.0, 12.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let encoded = codec.encode(&data, &float64).unwrap();
        assert_eq!(encoded.len(), 6);
        assert_eq!(codec.decode(&encoded, &float64, 3).unwrap(), data);
        assert!(codec.decode(&encoded, &float64, 4).is_err());
        assert!(codec.encoded_data_type(&zarrs::array::data_type::int16()).is_err());
    }
}
