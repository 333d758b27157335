//! numcodecs `delta` on the batched path: each decoded chunk's running sum
//! is taken in place ([`ElementFilters::delta`](crate::format::filters::ElementFilters::delta)),
//! where the differences are stored in the array's own type (`astype` equal
//! to `dtype`); a narrowing `astype` is read by zarrs.

use serde_json::{Map, Value};

use crate::format::filters::DeltaType;
use crate::zarrs_plugins::numeric::Numeric;

/// The running sum that undoes a `delta` of `configuration` on elements of
/// `elem` bytes.
pub(super) fn delta_type(configuration: &Map<String, Value>, elem: usize) -> Result<DeltaType, String> {
    let text = |key: &str| configuration.get(key).and_then(Value::as_str);
    let dtype = text("dtype").ok_or("numcodecs delta without a dtype")?;
    let parse = |d: &str| Numeric::parse(d).map_err(|e| format!("numcodecs delta: {e}"));
    let numeric = parse(dtype)?;
    if let Some(astype) = text("astype").filter(|a| parse(a) != Ok(numeric)) {
        return Err(format!(
            "numcodecs delta stores {dtype} as {astype}: only astype equal to dtype is batched"
        ));
    }
    if numeric.size() != elem {
        return Err(format!("numcodecs delta of {dtype} on elements of {elem} bytes"));
    }
    Ok(match numeric {
        Numeric::F32 => DeltaType::Float32,
        Numeric::F64 => DeltaType::Float64,
        integer => DeltaType::Int(integer.size()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn delta(json: Value, elem: usize) -> Result<DeltaType, String> {
        delta_type(json.as_object().unwrap(), elem)
    }

    #[test]
    fn running_sums_are_in_the_stored_type() {
        assert_eq!(delta(json!({"dtype": "<i4"}), 4), Ok(DeltaType::Int(4)));
        assert_eq!(
            delta(json!({"dtype": ">u2", "astype": ">u2"}), 2),
            Ok(DeltaType::Int(2))
        );
        assert_eq!(
            delta(json!({"dtype": "<f4", "astype": "float32"}), 4),
            Ok(DeltaType::Float32)
        );
        assert_eq!(delta(json!({"dtype": "<f8"}), 8), Ok(DeltaType::Float64));
        assert_eq!(
            delta(json!({"dtype": "|i1", "astype": "|i1"}), 1),
            Ok(DeltaType::Int(1))
        );
        let err = delta(json!({"dtype": "<i8", "astype": "<i2"}), 8).unwrap_err();
        assert!(err.contains("astype"), "{err}");
        assert!(delta(json!({"dtype": "<i8"}), 4).unwrap_err().contains("4 bytes"));
        assert!(delta(json!({"dtype": "<f2"}), 2).is_err());
        assert!(delta(json!({}), 2).is_err());
    }
}
