//! The reader's chain classifier for the Python package: the zarr codec
//! pipeline and the numcodecs path batch exactly the chains it batches, and
//! hand its verdict ([`StoredChain`]) back to decode and encode stored
//! chunks (`pipeline`).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrs_nvcomp::reader::{classify_metadata, BatchedCodec, ChainClass};

use crate::config::to_python;
use crate::errors::invalid_argument;

/// How the reader decodes the chunks of the array whose metadata (a
/// `zarr.json` or v2 `.zarray` document) is `metadata_json`, as a dict:
/// `batched` (the codec's name, None where zarrs' pipeline decodes them),
/// `fallback_reason`, `config` (the engine configuration of an algorithm,
/// None for blosc), `framing` (`crc32c`, `strip_front`, `strip_back`,
/// `adler32`), `filters` (`swap`, `delta`, `scale_offset`, `order`),
/// `sharded`, `compressor` (its name in the metadata), `decodes_stored` and
/// `encodes_stored` (whether whole stored chunks decode and encode in
/// batches here) and `chain`, the verdict as a [`StoredChain`].
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
    dict.set_item("compressor", class.compressor.clone())?;
    dict.set_item("decodes_stored", class.decodes_stored())?;
    dict.set_item("encodes_stored", class.encodes_stored())?;
    let metadata_json = metadata_json.to_owned();
    dict.set_item("chain", StoredChain { class, metadata_json })?;
    Ok(dict)
}

/// The reader's verdict on a chain, held for the calls that decode and
/// encode its stored chunks: Python never takes a stored chunk apart.
/// Pickled as its metadata, classified again where it is unpickled (zarr
/// pickles arrays with their codec pipeline).
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct StoredChain {
    class: ChainClass,
    metadata_json: String,
}

impl StoredChain {
    /// The classification.
    pub(crate) fn class(&self) -> &ChainClass {
        &self.class
    }
}

#[pymethods]
impl StoredChain {
    /// The verdict on the chain of the array whose metadata is
    /// `metadata_json` (as [`classify_chain`]).
    #[new]
    fn new(metadata_json: String) -> PyResult<Self> {
        let class = classify_metadata(&metadata_json).map_err(|e| invalid_argument(e.to_string()))?;
        Ok(Self { class, metadata_json })
    }

    fn __getnewargs__(&self) -> (String,) {
        (self.metadata_json.clone(),)
    }

    /// The compressor's name in the metadata (the batched codec's where the
    /// metadata names none), for messages; None where the chain falls back.
    #[getter]
    fn codec(&self) -> Option<String> {
        let batched = self.class.codec.as_ref().ok()?;
        Some(
            self.class
                .compressor
                .clone()
                .unwrap_or_else(|| batched.name().to_owned()),
        )
    }

    /// Whether whole stored chunks decode here in batches
    /// (`ChainClass::decodes_stored`).
    #[getter]
    fn decodes_stored(&self) -> bool {
        self.class.decodes_stored()
    }

    /// Whether chunks encode here in batches (`ChainClass::encodes_stored`).
    #[getter]
    fn encodes_stored(&self) -> bool {
        self.class.encodes_stored()
    }

    /// The chunk's dimensions in stored order; None for C order.
    #[getter]
    fn order(&self) -> Option<Vec<usize>> {
        self.class.filters.order.clone()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StoredChain>()?;
    m.add_function(wrap_pyfunction!(classify_chain, m)?)
}
