//! numcodecs `delta`: each element stored as its difference from the one
//! before it in the chunk.
//!
//! # Metadata
//!
//! Zarr v2 filter `{"id": "delta", "dtype": "<i4", "astype": "<i2"}`, zarr v3
//! `{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}`.
//!
//! - `dtype` (required): the array's data type.
//! - `astype` (optional, default `dtype`): the data type of the stored
//!   differences.
//!
//! # Encoded chunk
//!
//! The chunk's elements flattened in storage order, `x[0], x[1] - x[0], ...,
//! x[n-1] - x[n-2]`, the differences computed in `dtype` (integers wrap) and
//! converted to `astype` as NumPy's `astype` does. Decoding converts back to
//! `dtype` and takes the running sum in `dtype`: integers wrap, floats add in
//! order, as `numpy.cumsum` does.

use serde::{Deserialize, Serialize};
use zarrs::array::DataType;

use super::filter::{impl_filter_codec, parse_configuration, Filter};
use super::numeric::{with_element, Conversion, Element, Numeric};

/// The numcodecs `delta` filter (see the [module documentation](self)).
#[derive(Debug, Clone, Serialize)]
pub struct DeltaCodec {
    #[serde(flatten)]
    configuration: DeltaConfiguration,
    #[serde(skip)]
    types: Conversion,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeltaConfiguration {
    dtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    astype: Option<String>,
}

zarrs::plugin::impl_extension_aliases!(DeltaCodec, v3: "numcodecs.delta", v2: "delta");
impl_filter_codec!(DeltaCodec);

fn running_sum<T: Element>(bytes: &mut [u8]) {
    let mut sum: Option<T> = None;
    for element in bytes.chunks_exact_mut(T::SIZE) {
        let next = sum.map_or(T::read(element), |s| s.add(T::read(element)));
        next.write(element);
        sum = Some(next);
    }
}

fn differences<T: Element>(bytes: &mut [u8]) {
    let mut previous: Option<T> = None;
    for element in bytes.chunks_exact_mut(T::SIZE) {
        let value = T::read(element);
        if let Some(p) = previous {
            value.sub(p).write(element);
        }
        previous = Some(value);
    }
}

impl Filter for DeltaCodec {
    const NAME: &'static str = "numcodecs.delta";
    const KEEPS_SHAPE: bool = true;

    fn from_configuration(configuration: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let configuration: DeltaConfiguration = parse_configuration(configuration)?;
        let types = Conversion::parse(&configuration.dtype, configuration.astype.as_deref())?;
        Ok(Self { configuration, types })
    }

    fn encoded_data_type(&self, decoded: &DataType) -> Result<DataType, String> {
        self.types.encoded_data_type(decoded)
    }

    fn encode(&self, decoded: &[u8], data_type: &DataType) -> Result<Vec<u8>, String> {
        // A `data_type` other than `dtype` only makes these differences
        // meaningless: `store` rejects it.
        let mut bytes = decoded.to_vec();
        with_element!(self.types.dtype, T => differences::<T>(&mut bytes));
        self.types.store(&bytes, data_type)
    }

    fn decode(&self, encoded: &[u8], data_type: &DataType, elements: u64) -> Result<Vec<u8>, String> {
        let mut bytes = self.types.load(encoded, data_type, elements)?;
        with_element!(self.types.dtype, T => running_sum::<T>(&mut bytes));
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(json: serde_json::Value) -> DeltaCodec {
        DeltaCodec::from_configuration(json.as_object().unwrap()).unwrap()
    }

    #[test]
    fn round_trips_with_wrapping_differences() {
        let codec = codec(serde_json::json!({"id": "delta", "dtype": "<u1"}));
        let data = [250u8, 3, 3, 200, 0];
        let encoded = codec.encode(&data, &zarrs::array::data_type::uint8()).unwrap();
        assert_eq!(encoded, [250, 9, 0, 197, 56]);
        let decoded = codec.decode(&encoded, &zarrs::array::data_type::uint8(), 5).unwrap();
        assert_eq!(decoded, data);
    }

    #[test]
    fn narrows_to_astype_and_back() {
        let codec = codec(serde_json::json!({"dtype": "<i8", "astype": "<i2"}));
        let data: Vec<u8> = [1000i64, 1010, 990].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let encoded = codec.encode(&data, &zarrs::array::data_type::int64()).unwrap();
        assert_eq!(encoded.len(), 6);
        assert_eq!(
            codec.decode(&encoded, &zarrs::array::data_type::int64(), 3).unwrap(),
            data
        );
    }

    #[test]
    fn rejects_wrong_types_and_lengths() {
        let codec = codec(serde_json::json!({"dtype": "<i4"}));
        let int32 = zarrs::array::data_type::int32();
        assert!(codec.decode(&[0; 8], &zarrs::array::data_type::float32(), 2).is_err());
        assert!(codec
            .decode(&[0; 7], &int32, 2)
            .unwrap_err()
            .contains("7 encoded bytes"));
        let unknown =
            DeltaCodec::from_configuration(serde_json::json!({"dtype": "<i4", "scale": 2}).as_object().unwrap());
        assert!(unknown.unwrap_err().contains("scale"));
    }
}
