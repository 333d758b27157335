//! numcodecs `fixedscaleoffset` on the batched path: each decoded chunk's
//! stored integers (`astype`) are widened into the array's floats (`dtype`)
//! ([`ScaleOffset`]) before they are placed, where `dtype` is float32 or
//! float64 and `astype` an integer type; other configurations are read by
//! zarrs.

use serde_json::{Map, Value};

use crate::format::scale_offset::ScaleOffset;
use crate::zarrs_plugins::numeric::Numeric;

/// The widening that undoes a `fixedscaleoffset` of `configuration` on
/// elements of `elem` bytes.
pub(super) fn scale_offset(configuration: &Map<String, Value>, elem: usize) -> Result<ScaleOffset, String> {
    let text = |key: &str| configuration.get(key).and_then(Value::as_str);
    let number = |key: &str| {
        configuration
            .get(key)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("numcodecs fixedscaleoffset without a finite {key}"))
    };
    let parse = |d: &str| Numeric::parse(d).map_err(|e| format!("numcodecs fixedscaleoffset: {e}"));
    let dtype = text("dtype").ok_or("numcodecs fixedscaleoffset without a dtype")?;
    let wide = match parse(dtype)? {
        Numeric::F32 => false,
        Numeric::F64 => true,
        _ => {
            return Err(format!(
                "numcodecs fixedscaleoffset to {dtype}: only float dtypes are batched"
            ))
        }
    };
    let astype = text("astype").unwrap_or(dtype);
    let (stored_size, signed) = match parse(astype)? {
        Numeric::F32 | Numeric::F64 => {
            return Err(format!(
                "numcodecs fixedscaleoffset stores {dtype} as {astype}: only integer astypes are batched"
            ))
        }
        integer @ (Numeric::I8 | Numeric::I16 | Numeric::I32 | Numeric::I64) => (integer.size(), true),
        integer => (integer.size(), false),
    };
    let (scale, offset) = (number("scale")?, number("offset")?);
    if scale == 0.0 {
        return Err("numcodecs fixedscaleoffset of scale 0".into());
    }
    let filter = ScaleOffset {
        stored_size,
        signed,
        wide,
        scale,
        offset,
    };
    if filter.decoded_size() != elem {
        return Err(format!(
            "numcodecs fixedscaleoffset to {dtype} on elements of {elem} bytes"
        ));
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(json: Value, elem: usize) -> Result<ScaleOffset, String> {
        scale_offset(json.as_object().unwrap(), elem)
    }

    #[test]
    fn integer_astypes_of_float_dtypes_are_batched() {
        assert_eq!(
            parse(
                json!({"id": "fixedscaleoffset", "scale": 10, "offset": 1000, "dtype": "<f8", "astype": "|u1"}),
                8
            ),
            Ok(ScaleOffset {
                stored_size: 1,
                signed: false,
                wide: true,
                scale: 10.0,
                offset: 1000.0,
            })
        );
        let got = parse(
            json!({"scale": 0.5, "offset": -1.25, "dtype": "float32", "astype": ">i2"}),
            4,
        )
        .unwrap();
        assert_eq!((got.stored_size, got.signed, got.wide), (2, true, false));
        for (json, elem, why) in [
            (json!({"scale": 1, "offset": 0, "dtype": "<f4"}), 4, "astype"),
            (
                json!({"scale": 1, "offset": 0, "dtype": "<f8", "astype": "<f4"}),
                8,
                "astype",
            ),
            (
                json!({"scale": 1, "offset": 0, "dtype": "<i4", "astype": "<i2"}),
                4,
                "float dtypes",
            ),
            (
                json!({"scale": 0, "offset": 0, "dtype": "<f4", "astype": "<u1"}),
                4,
                "scale 0",
            ),
            (json!({"offset": 0, "dtype": "<f4", "astype": "<u1"}), 4, "scale"),
            (
                json!({"scale": 2, "offset": "NaN", "dtype": "<f4", "astype": "<u1"}),
                4,
                "offset",
            ),
            (
                json!({"scale": 2, "offset": 0, "dtype": "<f8", "astype": "<u1"}),
                4,
                "4 bytes",
            ),
        ] {
            let err = parse(json.clone(), elem).unwrap_err();
            assert!(err.contains(why), "{json}: {err}");
        }
    }
}
