//! The numeric element types numcodecs' filters name in their configuration
//! (`"dtype": "<i4"`), and NumPy's `astype` conversion between them.
//!
//! A filter's configuration names NumPy data types by their `str`: a byte
//! order character (`<`, `>`, `|` or `=`) then a kind and a size (`i4`,
//! `u1`, `f8`). Inside a zarrs codec chain, array-to-array codecs see
//! elements in native byte order (the `bytes` codec that follows swaps them),
//! so the byte order character is read and otherwise ignored.

use num_traits::AsPrimitive;
use zarrs::array::{data_type, DataType};

/// A numeric element type of a numcodecs filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Numeric {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
}

impl Numeric {
    /// Parses a NumPy data type string (`"<i4"`, `"f8"`, `"uint16"`, ...).
    pub(crate) fn parse(dtype: &str) -> Result<Self, String> {
        let code = dtype.trim_start_matches(['<', '>', '|', '=']);
        Ok(match code {
            "i1" | "int8" => Self::I8,
            "i2" | "int16" => Self::I16,
            "i4" | "int32" => Self::I32,
            "i8" | "int64" => Self::I64,
            "u1" | "uint8" => Self::U8,
            "u2" | "uint16" => Self::U16,
            "u4" | "uint32" => Self::U32,
            "u8" | "uint64" => Self::U64,
            "f4" | "float32" => Self::F32,
            "f8" | "float64" => Self::F64,
            _ => {
                return Err(format!(
                    "data type {dtype:?} is not one of the integer and float types i1-i8, u1-u8, f4, f8"
                ))
            }
        })
    }

    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::U64 | Self::F64 => 8,
        }
    }

    /// The zarrs data type of the same elements.
    pub(super) fn data_type(self) -> DataType {
        match self {
            Self::I8 => data_type::int8(),
            Self::I16 => data_type::int16(),
            Self::I32 => data_type::int32(),
            Self::I64 => data_type::int64(),
            Self::U8 => data_type::uint8(),
            Self::U16 => data_type::uint16(),
            Self::U32 => data_type::uint32(),
            Self::U64 => data_type::uint64(),
            Self::F32 => data_type::float32(),
            Self::F64 => data_type::float64(),
        }
    }
}

/// The element types of a filter that stores the array's elements (`dtype`)
/// converted to another type (`astype`), as NumPy's `astype` converts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conversion {
    /// The array's element type.
    pub(crate) dtype: Numeric,
    /// The stored element type.
    pub(crate) astype: Numeric,
}

impl Conversion {
    /// A filter's `dtype` and its optional stored type (`astype`, default `dtype`).
    pub(crate) fn parse(dtype: &str, astype: Option<&str>) -> Result<Self, String> {
        let dtype = Numeric::parse(dtype)?;
        let astype = astype.map_or(Ok(dtype), Numeric::parse)?;
        Ok(Self { dtype, astype })
    }

    /// An error unless the array's `data_type` is `dtype`.
    fn check_data_type(self, data_type: &DataType) -> Result<(), String> {
        if self.dtype.data_type() == *data_type {
            Ok(())
        } else {
            Err(format!(
                "configured for {:?} elements, applied to {data_type}",
                self.dtype
            ))
        }
    }

    /// The encoded data type (`astype`) of an array of `decoded`, which must be `dtype`.
    pub(crate) fn encoded_data_type(self, decoded: &DataType) -> Result<DataType, String> {
        self.check_data_type(decoded)?;
        Ok(self.astype.data_type())
    }

    /// Elements of `dtype` converted to `astype`, after checking the array's
    /// `data_type`.
    pub(crate) fn store(self, decoded: &[u8], data_type: &DataType) -> Result<Vec<u8>, String> {
        self.check_data_type(data_type)?;
        Ok(cast(decoded, self.dtype, self.astype))
    }

    /// `elements` stored elements converted back to `dtype`, after checking
    /// the array's `data_type` and the length of `encoded`.
    pub(crate) fn load(self, encoded: &[u8], data_type: &DataType, elements: u64) -> Result<Vec<u8>, String> {
        self.check_data_type(data_type)?;
        let expected = elements.saturating_mul(self.astype.size() as u64);
        if encoded.len() as u64 != expected {
            return Err(format!(
                "{} encoded bytes, expected {expected} ({elements} elements of {:?})",
                encoded.len(),
                self.astype
            ));
        }
        Ok(cast(encoded, self.astype, self.dtype))
    }
}

/// A primitive element read from and written to native-endian bytes.
pub(crate) trait Element: Copy + 'static {
    /// Bytes per element.
    const SIZE: usize;
    /// The element in `bytes` (exactly [`Self::SIZE`] long).
    fn read(bytes: &[u8]) -> Self;
    /// Writes the element into `bytes` (exactly [`Self::SIZE`] long).
    fn write(self, bytes: &mut [u8]);
    /// `self + other`, wrapping for integers as NumPy's integer arithmetic does.
    fn add(self, other: Self) -> Self;
    /// `self - other`, wrapping for integers.
    fn sub(self, other: Self) -> Self;
}

macro_rules! element {
    ($t:ty, |$a:ident, $b:ident| $add:expr, $sub:expr) => {
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one element"))
            }
            fn write(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            fn add(self, other: Self) -> Self {
                let ($a, $b) = (self, other);
                $add
            }
            fn sub(self, other: Self) -> Self {
                let ($a, $b) = (self, other);
                $sub
            }
        }
    };
}

macro_rules! integer_elements {
    ($($t:ty),*) => {
        $(element!($t, |a, b| a.wrapping_add(b), a.wrapping_sub(b));)*
    };
}
integer_elements!(i8, i16, i32, i64, u8, u16, u32, u64);
element!(f32, |a, b| a + b, a - b);
element!(f64, |a, b| a + b, a - b);

/// Runs `$body` with the type alias `$t` bound to the Rust type of `$numeric`.
macro_rules! with_element {
    ($numeric:expr, $t:ident => $body:expr) => {
        with_element!(@arms $numeric, $t, $body;
            I8 i8, I16 i16, I32 i32, I64 i64, U8 u8, U16 u16, U32 u32, U64 u64, F32 f32, F64 f64)
    };
    (@arms $numeric:expr, $t:ident, $body:expr; $($variant:ident $rust:ty),*) => {
        match $numeric {
            $(Numeric::$variant => {
                type $t = $rust;
                $body
            })*
        }
    };
}
pub(crate) use with_element;

fn cast_typed<F: Element + AsPrimitive<T>, T: Element>(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len() / F::SIZE * T::SIZE];
    for (from, to) in bytes.chunks_exact(F::SIZE).zip(out.chunks_exact_mut(T::SIZE)) {
        F::read(from).as_().write(to);
    }
    out
}

/// NumPy's `astype` from `from` to `to` over native-endian `bytes`: integers
/// wrap, floats round to nearest, floats to integers truncate toward zero
/// (saturating where NumPy leaves the result undefined).
fn cast(bytes: &[u8], from: Numeric, to: Numeric) -> Vec<u8> {
    if from == to {
        return bytes.to_vec();
    }
    with_element!(from, F => with_element!(to, T => cast_typed::<F, T>(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numpy_strings() {
        assert_eq!(Numeric::parse("<i4"), Ok(Numeric::I32));
        assert_eq!(Numeric::parse(">f8"), Ok(Numeric::F64));
        assert_eq!(Numeric::parse("|u1"), Ok(Numeric::U8));
        assert_eq!(Numeric::parse("uint16"), Ok(Numeric::U16));
        assert!(Numeric::parse("<f2").unwrap_err().contains("<f2"));
    }

    #[test]
    fn casts_like_numpy() {
        let ints: Vec<u8> = [300i32, -1, 7].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(cast(&ints, Numeric::I32, Numeric::U8), vec![44, 255, 7]);
        let floats: Vec<u8> = [1.9f64, -2.7].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let truncated: Vec<i16> = cast(&floats, Numeric::F64, Numeric::I16)
            .chunks_exact(2)
            .map(i16::read)
            .collect();
        assert_eq!(truncated, [1, -2]);
        let narrowed = cast(&floats, Numeric::F64, Numeric::F32);
        assert_eq!(f32::read(&narrowed[..4]), 1.9f32);
    }
}
