//! [`DataType`], the element type hint nvCOMP's compressors take, and how
//! configurations spell it.

use serde_json::Value;

use crate::error::{Error, Result};

/// Element type hint passed to nvCOMP (`nvcompType_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DataType {
    /// 1-byte signed (`NVCOMP_TYPE_CHAR`), the default.
    #[default]
    Char,
    /// 1-byte unsigned.
    Uchar,
    /// 2-byte signed.
    Short,
    /// 2-byte unsigned.
    Ushort,
    /// 4-byte signed.
    Int,
    /// 4-byte unsigned.
    Uint,
    /// 8-byte signed.
    Longlong,
    /// 8-byte unsigned.
    Ulonglong,
    /// IEEE half precision.
    Float16,
    /// IEEE single precision.
    Float32,
    /// IEEE double precision.
    Float64,
    /// Bits (`NVCOMP_TYPE_BITS`).
    Bits,
}

impl DataType {
    const ALL: [(DataType, &'static str, i64); 12] = [
        (Self::Char, "char", 0),
        (Self::Uchar, "uchar", 1),
        (Self::Short, "short", 2),
        (Self::Ushort, "ushort", 3),
        (Self::Int, "int", 4),
        (Self::Uint, "uint", 5),
        (Self::Longlong, "longlong", 6),
        (Self::Ulonglong, "ulonglong", 7),
        (Self::Float16, "float16", 10),
        (Self::Float32, "float32", 11),
        (Self::Float64, "float64", 12),
        (Self::Bits, "bits", 0xff),
    ];

    /// The name written into configurations.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(t, ..)| *t == self).map(|(_, n, _)| *n).unwrap()
    }

    /// nvCOMP's `nvcompType_t` value.
    pub fn nvcomp_value(self) -> i64 {
        Self::ALL.iter().find(|(t, ..)| *t == self).map(|(.., v)| *v).unwrap()
    }

    /// Parses a name (`"uint"`, also NumPy's `"uint32"`, `"int8"`, ...) or an
    /// `nvcompType_t` integer.
    pub(super) fn parse(algorithm: &'static str, option: &str, value: &Value) -> Result<Self> {
        let found = match value {
            Value::Number(n) => n.as_i64().and_then(|v| Self::ALL.iter().find(|(.., x)| *x == v)),
            Value::String(s) => {
                let s = s.to_ascii_lowercase();
                let s = match s.trim_start_matches(['<', '>', '|', '=']) {
                    "int8" | "i1" | "b" => "char",
                    "uint8" | "u1" | "bool" => "uchar",
                    "int16" | "i2" => "short",
                    "uint16" | "u2" => "ushort",
                    "int32" | "i4" => "int",
                    "uint32" | "u4" => "uint",
                    "int64" | "i8" => "longlong",
                    "uint64" | "u8" => "ulonglong",
                    "f2" | "half" => "float16",
                    "f4" | "float" => "float32",
                    "f8" | "double" => "float64",
                    other => other,
                }
                .to_string();
                Self::ALL.iter().find(|(_, n, _)| *n == s)
            }
            _ => None,
        };
        found.map(|(t, ..)| *t).ok_or_else(|| Error::InvalidOption {
            algorithm,
            option: option.to_string(),
            reason: format!(
                "{value} is not a data type; valid: {} or their nvcompType_t integers",
                Self::ALL.map(|(_, n, _)| n).join(", ")
            ),
        })
    }
}
