//! numcodecs `packbits`: a boolean chunk stored eight elements to a byte.
//!
//! This is numcodecs' `PackBits` filter, not the zarr `packbits` codec of
//! zarr-extensions (which zarrs provides): zarr v2 filter `{"id": "packbits"}`,
//! zarr v3 `{"name": "numcodecs.packbits"}`, no configuration.
//!
//! # Encoded chunk
//!
//! A one-dimensional `uint8` array of `1 + ceil(n / 8)` bytes for a chunk of
//! `n` booleans: the number of padding bits in the last byte (0-7), then the
//! elements in storage order, most significant bit first (`numpy.packbits`),
//! the last byte padded with zero bits.

use std::num::NonZeroU64;

use zarrs::array::{data_type, ChunkShape, DataType};

use super::filter::{impl_filter_codec, parse_configuration, Filter};

/// The numcodecs `packbits` filter (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PackBitsCodec;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PackBitsConfiguration {}

zarrs::plugin::impl_extension_aliases!(PackBitsCodec, v3: "numcodecs.packbits", v2: "packbits");
impl_filter_codec!(PackBitsCodec);

fn check_bool(data_type: &DataType) -> Result<(), String> {
    if *data_type == data_type::bool() {
        Ok(())
    } else {
        Err(format!("packs bool elements, not {data_type}"))
    }
}

fn packed_len(elements: u64) -> u64 {
    1 + elements.div_ceil(8)
}

impl Filter for PackBitsCodec {
    const NAME: &'static str = "numcodecs.packbits";
    const KEEPS_SHAPE: bool = false;

    fn from_configuration(configuration: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let PackBitsConfiguration {} = parse_configuration(configuration)?;
        Ok(Self)
    }

    fn encoded_data_type(&self, decoded: &DataType) -> Result<DataType, String> {
        check_bool(decoded)?;
        Ok(data_type::uint8())
    }

    fn encoded_shape(&self, shape: &[NonZeroU64]) -> ChunkShape {
        let elements = shape.iter().map(|d| d.get()).product();
        vec![NonZeroU64::new(packed_len(elements)).expect("at least the padding byte")]
    }

    fn encode(&self, decoded: &[u8], data_type: &DataType) -> Result<Vec<u8>, String> {
        check_bool(data_type)?;
        let mut out = vec![0u8; 1 + decoded.len().div_ceil(8)];
        out[0] = ((8 - decoded.len() % 8) % 8) as u8;
        for (i, &b) in decoded.iter().enumerate() {
            out[1 + i / 8] |= u8::from(b != 0) << (7 - i % 8);
        }
        Ok(out)
    }

    fn decode(&self, encoded: &[u8], data_type: &DataType, elements: u64) -> Result<Vec<u8>, String> {
        check_bool(data_type)?;
        let expected = packed_len(elements);
        if encoded.len() as u64 != expected {
            return Err(format!(
                "{} encoded bytes, expected {expected} for {elements} elements",
                encoded.len()
            ));
        }
        let padding = (8 - elements % 8) % 8;
        if u64::from(encoded[0]) != padding {
            return Err(format!(
                "the header declares {} padding bits, {elements} elements leave {padding}",
                encoded[0]
            ));
        }
        let bits = &encoded[1..];
        Ok((0..elements as usize)
            .map(|i| (bits[i / 8] >> (7 - i % 8)) & 1)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_most_significant_bit_first() {
        let bools = [1u8, 0, 1, 1, 0, 0, 0, 0, 1, 1];
        let encoded = PackBitsCodec.encode(&bools, &data_type::bool()).unwrap();
        assert_eq!(encoded, [6, 0b1011_0000, 0b1100_0000]);
        assert_eq!(PackBitsCodec.decode(&encoded, &data_type::bool(), 10).unwrap(), bools);
        assert!(PackBitsCodec.decode(&encoded, &data_type::bool(), 9).is_err());
        assert!(PackBitsCodec.decode(&[5, 0, 0], &data_type::bool(), 10).is_err());
        assert!(PackBitsCodec.encoded_data_type(&data_type::uint8()).is_err());
    }
}
