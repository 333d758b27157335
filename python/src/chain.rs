//! The reader's chain classifier for the Python package: the zarr codec
//! pipeline and the numcodecs path batch exactly the chains it batches.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrs_nvcomp::reader::{classify_metadata, BatchedCodec};

use crate::config::to_python;
use crate::errors::invalid_argument;

/// How the reader decodes the chunks of the array whose metadata (a
/// `zarr.json` or v2 `.zarray` document) is `metadata_json`, as a dict:
/// `batched` (the codec's name, None where zarrs' pipeline decodes them),
/// `fallback_reason`, `config` (the engine configuration of an algorithm,
/// None for blosc), `framing` (`crc32c`, `strip_front`, `strip_back`,
/// `adler32`), `filters` (`swap`, `delta`, `scale_offset`, `order`),
/// `sharded` and `compressor` (its name in the metadata).
/// `InvalidArgumentError` where the metadata is not an array's zarrs opens.
#[pyfunction]
fn classify_chain<'py>(py: Python<'py>, metadata_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let class = classify_metadata(metadata_json).map_err(|e| invalid_argument(e.to_string()))?;
    let dict = PyDict::new(py);
    dict.set_item("batched", class.codec.as_ref().ok().map(BatchedCodec::name))?;
    dict.set_item("fallback_reason", class.codec.as_ref().err())?;
    let config = match &class.codec {
        Ok(BatchedCodec::Algorithm(algorithm)) => Some(to_python(py, &algorithm.to_config())?),
        _ => None,
    };
    dict.set_item("config", config)?;
    let framing = PyDict::new(py);
    framing.set_item("crc32c", class.framing.crc32c)?;
    framing.set_item("strip_front", class.framing.strip_front)?;
    framing.set_item("strip_back", class.framing.strip_back)?;
    framing.set_item("adler32", class.framing.adler32)?;
    dict.set_item("framing", framing)?;
    let filters = PyDict::new(py);
    filters.set_item("swap", class.filters.swap)?;
    filters.set_item("delta", class.filters.delta)?;
    filters.set_item("scale_offset", class.filters.scale_offset)?;
    filters.set_item("order", class.filters.order.clone())?;
    dict.set_item("filters", filters)?;
    dict.set_item("sharded", class.sharded)?;
    dict.set_item("compressor", class.compressor)?;
    Ok(dict)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(classify_chain, m)?)
}
