//! numcodecs `quantize`: floats rounded to a number of decimal digits, so
//! that the compressor that follows finds more repetition.
//!
//! # Metadata
//!
//! Zarr v2 filter `{"id": "quantize", "digits": 2, "dtype": "<f8", "astype": "<f4"}`,
//! zarr v3 `{"name": "numcodecs.quantize", "configuration": {"digits": 2, "dtype": "<f8"}}`.
//!
//! - `digits` (required): decimal digits to keep.
//! - `dtype` (required): the array's float data type (`f4` or `f8`).
//! - `astype` (optional, default `dtype`): the stored float data type.
//!
//! # Encoded chunk
//!
//! With `e` = `floor(-digits)` (`ceil` where non-negative) and
//! `scale = 2^ceil(log2(10^-e))`, each element `x` is stored as
//! `round_half_even(scale * x) / scale` converted to `astype`, the products
//! computed in `dtype`. Decoding only converts back to `dtype`: the rounding
//! is not undone.

use serde::{Deserialize, Serialize};
use zarrs::array::DataType;

use super::filter::{impl_filter_codec, parse_configuration, Filter};
use super::numeric::{Conversion, Element, Numeric};

/// The numcodecs `quantize` filter (see the [module documentation](self)).
#[derive(Debug, Clone, Serialize)]
pub struct QuantizeCodec {
    #[serde(flatten)]
    configuration: QuantizeConfiguration,
    #[serde(skip)]
    types: Conversion,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuantizeConfiguration {
    digits: i32,
    dtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    astype: Option<String>,
}

zarrs::plugin::impl_extension_aliases!(QuantizeCodec, v3: "numcodecs.quantize", v2: "quantize");
impl_filter_codec!(QuantizeCodec);

impl QuantizeCodec {
    /// numcodecs' power-of-two scale for `digits` decimal digits.
    fn scale(&self) -> f64 {
        let exp = 10f64.powi(-self.configuration.digits).log10();
        let exp = if exp < 0.0 { exp.floor() } else { exp.ceil() };
        2f64.powf(10f64.powf(-exp).log2().ceil())
    }
}

impl Filter for QuantizeCodec {
    const NAME: &'static str = "numcodecs.quantize";
    const KEEPS_SHAPE: bool = true;

    fn from_configuration(configuration: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let configuration: QuantizeConfiguration = parse_configuration(configuration)?;
        let types = Conversion::parse(&configuration.dtype, configuration.astype.as_deref())?;
        for t in [types.dtype, types.astype] {
            if !matches!(t, Numeric::F32 | Numeric::F64) {
                return Err(format!("only float data types (f4, f8) quantize, not {t:?}"));
            }
        }
        Ok(Self { configuration, types })
    }

    fn encoded_data_type(&self, decoded: &DataType) -> Result<DataType, String> {
        self.types.encoded_data_type(decoded)
    }

    #[allow(clippy::cast_possible_truncation)]
    fn encode(&self, decoded: &[u8], data_type: &DataType) -> Result<Vec<u8>, String> {
        // A `data_type` other than `dtype` only makes this rounding
        // meaningless: `store` rejects it.
        let scale = self.scale();
        let mut bytes = decoded.to_vec();
        match self.types.dtype {
            Numeric::F32 => {
                let scale = scale as f32;
                for element in bytes.chunks_exact_mut(4) {
                    ((scale * f32::read(element)).round_ties_even() / scale).write(element);
                }
            }
            _ => {
                for element in bytes.chunks_exact_mut(8) {
                    ((scale * f64::read(element)).round_ties_even() / scale).write(element);
                }
            }
        }
        self.types.store(&bytes, data_type)
    }

    fn decode(&self, encoded: &[u8], data_type: &DataType, elements: u64) -> Result<Vec<u8>, String> {
        self.types.load(encoded, data_type, elements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_digits_asked_for() {
        let json = serde_json::json!({"digits": 2, "dtype": "<f8", "astype": "<f4"});
        let codec = QuantizeCodec::from_configuration(json.as_object().unwrap()).unwrap();
        assert_eq!(codec.scale(), 128.0);
        let float64 = zarrs::array::data_type::float64();
        let data: Vec<u8> = [std::f64::consts::PI, -1.0 / 3.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let decoded = codec
            .decode(&codec.encode(&data, &float64).unwrap(), &float64, 2)
            .unwrap();
        let values: Vec<f64> = decoded.chunks_exact(8).map(f64::read).collect();
        assert_eq!(values, [402.0 / 128.0, -43.0 / 128.0]);
        let ints = serde_json::json!({"digits": 2, "dtype": "<i4"});
        assert!(QuantizeCodec::from_configuration(ints.as_object().unwrap()).is_err());
    }
}
