//! Codec configurations cross the boundary as Python dicts: converted here to
//! and from the `serde_json::Value` that `Algorithm` reads and writes.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use zarrs_nvcomp::Algorithm;

use crate::errors::{engine_error, invalid_argument};

/// `value` (None, bool, int, float, str, list, tuple, dict with str keys) as JSON.
pub(crate) fn to_json(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return value
            .extract::<u64>()
            .map(Value::from)
            .map_err(|_| invalid_argument(format!("configuration integer {value} is out of range")));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| invalid_argument(format!("configuration number {value} is not finite")));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let key = key
                .cast::<PyString>()
                .map_err(|_| invalid_argument(format!("configuration key {key} is not a string")))?;
            map.insert(key.to_str()?.to_owned(), to_json(&item)?);
        }
        return Ok(Value::Object(map));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        return value
            .try_iter()?
            .map(|item| to_json(&item?))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    Err(invalid_argument(format!(
        "configuration value {value} of type {} is not None, a bool, a number, a string, a list or a dict",
        value.get_type().name()?
    )))
}

/// `value` as Python objects: dicts, lists, str, int, float, bool, None.
pub(crate) fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => PyList::new(
            py,
            items.iter().map(|v| to_python(py, v)).collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// The algorithm of a configuration dict `{"algorithm": ..., "options": {...}}`:
/// read as stored metadata (`stored`, where kvikio's defaults apply to options
/// left out) or as the arguments of a new codec.
pub(crate) fn algorithm(config: &Bound<'_, PyAny>, stored: bool) -> PyResult<Algorithm> {
    let config = to_json(config)?;
    let algorithm = if stored {
        Algorithm::from_config(&config)
    } else {
        Algorithm::from_codec_args(&config)
    };
    algorithm.map_err(engine_error)
}

/// Parses a configuration and returns it normalized (every option written
/// out). `stored`: it was read from metadata, which kvikio may have written
/// (options left out take kvikio's defaults); otherwise it holds the
/// arguments of a new codec.
#[pyfunction]
#[pyo3(signature = (config, stored=false))]
pub(crate) fn normalize_config<'py>(config: &Bound<'py, PyAny>, stored: bool) -> PyResult<Bound<'py, PyAny>> {
    to_python(config.py(), &algorithm(config, stored)?.to_config())
}

/// Whether the algorithm a configuration names has a CPU implementation.
#[pyfunction]
pub(crate) fn has_cpu_implementation(config: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(algorithm(config, false)?.has_cpu_implementation())
}
