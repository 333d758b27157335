//! The NumPy array-interface type string of a zarrs data type, in native
//! byte order (the reader's output order).

use zarrs::array::data_type::{
    FixedLengthUTF32DataType, NumpyDateTime64DataType, NumpyTimeDelta64DataType, NumpyTimeUnit, RawBitsDataType,
};
use zarrs::array::DataType;
use zarrs::plugin::{ExtensionName, ZarrVersion};
use zarrs_nvcomp::data_types::{NullTerminatedBytesDataType, RawBytesDataType};

/// `M8[<scale><unit>]`'s bracket, or nothing for the generic unit.
fn time_unit(unit: NumpyTimeUnit, scale: u32) -> String {
    let name = serde_json::to_value(unit)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    match (name.as_str(), scale) {
        ("generic", _) => String::new(),
        (name, 1) => format!("[{name}]"),
        (name, scale) => format!("[{scale}{name}]"),
    }
}

/// The type string of `data_type`, or None where NumPy has no such type.
pub(crate) fn typestr(data_type: &DataType) -> Option<String> {
    let native = if cfg!(target_endian = "little") { '<' } else { '>' };
    let any = data_type.as_any();
    if let Some(t) = any.downcast_ref::<NumpyDateTime64DataType>() {
        return Some(format!("{native}M8{}", time_unit(t.unit, t.scale_factor.get())));
    }
    if let Some(t) = any.downcast_ref::<NumpyTimeDelta64DataType>() {
        return Some(format!("{native}m8{}", time_unit(t.unit, t.scale_factor.get())));
    }
    if let Some(t) = any.downcast_ref::<FixedLengthUTF32DataType>() {
        return Some(format!("{native}U{}", t.length_bytes().get() / 4));
    }
    if let Some(t) = any.downcast_ref::<NullTerminatedBytesDataType>() {
        return Some(format!("|S{}", t.length_bytes()));
    }
    if let Some(t) = any.downcast_ref::<RawBytesDataType>() {
        return Some(format!("|V{}", t.length_bytes()));
    }
    if let Some(t) = any.downcast_ref::<RawBitsDataType>() {
        return Some(format!("|V{}", t.size_bytes()));
    }
    let (kind, size) = match data_type.name(ZarrVersion::V3)?.as_ref() {
        "bool" => ("b", 1),
        "int8" => ("i", 1),
        "int16" => ("i", 2),
        "int32" => ("i", 4),
        "int64" => ("i", 8),
        "uint8" => ("u", 1),
        "uint16" => ("u", 2),
        "uint32" => ("u", 4),
        "uint64" => ("u", 8),
        "float16" => ("f", 2),
        "float32" => ("f", 4),
        "float64" => ("f", 8),
        "complex64" => ("c", 8),
        "complex128" => ("c", 16),
        _ => return None,
    };
    let order = if size == 1 { '|' } else { native };
    Some(format!("{order}{kind}{size}"))
}
