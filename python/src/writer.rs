//! The chunk-parallel writer (`zarrs_nvcomp.writer`): `write_chunks` writes
//! a box of an array from host memory (the buffer protocol) or device memory
//! (`(pointer, length)`), `create_array_metadata` writes a new array's
//! metadata. Python turns selections into boxes and arrays into bytes.

use std::collections::HashMap;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use zarrs::array::ArraySubset;
use zarrs_nvcomp::reader::{open_array, StoreIo};
use zarrs_nvcomp::writer::{
    create_array, write_chunks_parallel, NewArray, WriteData, WriteError, WriteOptions, WriteSummary,
};

use crate::awaitable::awaitable;
use crate::config::to_json;
use crate::errors::{invalid_argument, new_err, parse_device, write_error, Kind};
use crate::logging;
use crate::reader::{run_interruptible, ReaderArray};

/// [`run_interruptible`] for the writer's work.
fn interruptible<T: Send, F: std::future::Future<Output = Result<T, WriteError>>>(
    py: Python<'_>,
    work: impl FnOnce() -> F + Send,
) -> PyResult<T> {
    run_interruptible(py, work)?.map_err(write_error)
}

/// The options of a write into the array at `url`.
fn write_options(
    url: &str,
    device: Option<&str>,
    write_empty_chunks: bool,
    max_concurrent_requests: Option<usize>,
) -> PyResult<WriteOptions> {
    Ok(WriteOptions::default()
        .with_device(parse_device(device)?)
        .with_write_empty_chunks(write_empty_chunks)
        .with_max_concurrent_requests(
            max_concurrent_requests.unwrap_or(WriteOptions::default().max_concurrent_requests),
        )
        .with_store_io(StoreIo::for_url(url)))
}

/// The data of a write: `host` (a contiguous buffer, borrowed for as long
/// as the data) or `device_data` (`(pointer, length)` of device memory that
/// the caller keeps alive and unchanged while it is written).
fn write_data(host: Option<&PyBuffer<u8>>, device_data: Option<(u64, usize)>) -> PyResult<WriteData<'_>> {
    match (host, device_data) {
        (Some(buffer), None) => {
            if !buffer.is_c_contiguous() {
                return Err(invalid_argument("the data is not contiguous"));
            }
            let (ptr, len) = (buffer.buf_ptr() as usize, buffer.len_bytes());
            // SAFETY: the buffer's view holds its memory while it is borrowed.
            Ok(WriteData::Host(if len == 0 {
                &[]
            } else {
                unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
            }))
        }
        // SAFETY: the Python side passes a live, synchronised device array
        // that it keeps referenced for the write.
        (None, Some((ptr, len))) => Ok(unsafe { WriteData::device(ptr, len) }),
        _ => Err(invalid_argument("give exactly one of host and device_data")),
    }
}

/// Writes the box at `start` of shape `shape` of the array at `url` from
/// `host` (a contiguous buffer) or `device_data` (`(pointer, length)` of
/// device memory that the caller keeps alive and unchanged for the call).
/// Returns `(chunks stored, fill-value chunks, bytes stored)`.
#[pyfunction]
#[pyo3(signature = (url, storage_options, start, shape, host=None, device_data=None, device=None, write_empty_chunks=false, max_concurrent_requests=None))]
// One parameter per Python keyword argument of the write.
#[allow(clippy::too_many_arguments)]
fn write_chunks(
    py: Python<'_>,
    url: String,
    storage_options: Option<HashMap<String, String>>,
    start: Vec<u64>,
    shape: Vec<u64>,
    host: Option<PyBuffer<u8>>,
    device_data: Option<(u64, usize)>,
    device: Option<&str>,
    write_empty_chunks: bool,
    max_concurrent_requests: Option<usize>,
) -> PyResult<(usize, usize, u64)> {
    logging::refresh();
    let options = write_options(&url, device, write_empty_chunks, max_concurrent_requests)?;
    let subset = box_at(start, shape)?;
    let data = write_data(host.as_ref(), device_data)?;
    let options_map = storage_options.unwrap_or_default();
    let summary = interruptible(py, || write_at(&url, &options_map, &subset, data, &options))?;
    drop(host);
    Ok((summary.stored, summary.fill_chunks, summary.stored_bytes))
}

/// [`write_chunks`] as an asyncio future of `event_loop` (the caller's
/// running loop), resolved by a task of the library's local runner
/// ([`crate::awaitable`]), which holds `host` and `keep_alive` (the object
/// that owns `device_data`) until the write ends or is dropped.
/// Cancelling the future drops the write: each chunk is then the old one or
/// the new one (a put, or a file renamed over the old one), never a mix.
#[pyfunction]
#[pyo3(signature = (event_loop, url, storage_options, start, shape, host=None, device_data=None, device=None, write_empty_chunks=false, max_concurrent_requests=None, keep_alive=None))]
// One parameter per Python keyword argument of the write.
#[allow(clippy::too_many_arguments)]
fn write_chunks_async(
    py: Python<'_>,
    event_loop: &Bound<'_, PyAny>,
    url: String,
    storage_options: Option<HashMap<String, String>>,
    start: Vec<u64>,
    shape: Vec<u64>,
    host: Option<PyBuffer<u8>>,
    device_data: Option<(u64, usize)>,
    device: Option<&str>,
    write_empty_chunks: bool,
    max_concurrent_requests: Option<usize>,
    keep_alive: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    logging::refresh();
    let options = write_options(&url, device, write_empty_chunks, max_concurrent_requests)?;
    let subset = box_at(start, shape)?;
    // Checked now: the caller's errors are raised by the call.
    write_data(host.as_ref(), device_data)?;
    let options_map = storage_options.unwrap_or_default();
    let write = move || async move {
        let _owner = keep_alive;
        let data = write_data(host.as_ref(), device_data)?;
        write_at(&url, &options_map, &subset, data, &options)
            .await
            .map_err(write_error)
    };
    awaitable(py, event_loop, write, |py, summary: WriteSummary| {
        Ok((summary.stored, summary.fill_chunks, summary.stored_bytes)
            .into_pyobject(py)?
            .into_any()
            .unbind())
    })
}

/// Opens the array at `url` with `storage_options` and writes `data` into
/// its box `subset`.
async fn write_at(
    url: &str,
    storage_options: &HashMap<String, String>,
    subset: &ArraySubset,
    data: WriteData<'_>,
    options: &WriteOptions,
) -> Result<WriteSummary, WriteError> {
    let array = open_array(url, storage_options).await?;
    write_chunks_parallel(&array, subset, data, options).await
}

/// The box at `start` of shape `shape`.
fn box_at(start: Vec<u64>, shape: Vec<u64>) -> PyResult<ArraySubset> {
    ArraySubset::new_with_start_shape(start, shape).map_err(|e| new_err(Kind::Selection, e.to_string()))
}

/// Writes the metadata of a new array at `url` (`spec`: a dict of the fields
/// of `zarrs_nvcomp::writer::NewArray`), and returns it opened.
#[pyfunction]
#[pyo3(signature = (url, spec, storage_options=None))]
fn create_array_metadata(
    py: Python<'_>,
    url: String,
    spec: &Bound<'_, PyAny>,
    storage_options: Option<HashMap<String, String>>,
) -> PyResult<ReaderArray> {
    let spec = to_json(spec)?;
    let field = |name: &str| spec.get(name).cloned().unwrap_or(serde_json::Value::Null);
    let shape = |name: &str| -> PyResult<Vec<u64>> {
        serde_json::from_value(field(name)).map_err(|e| invalid_argument(format!("{name}: {e}")))
    };
    let new = NewArray {
        shape: shape("shape")?,
        chunks: shape("chunks")?,
        shards: match field("shards") {
            serde_json::Value::Null => None,
            _ => Some(shape("shards")?),
        },
        data_type: field("data_type").as_str().unwrap_or_default().to_string(),
        fill_value: field("fill_value"),
        compressor: Some(field("compressor")).filter(|c| !c.is_null()),
        zarr_format: field("zarr_format").as_u64().unwrap_or(3).try_into().unwrap_or(0),
        overwrite: field("overwrite").as_bool().unwrap_or(false),
        attributes: match field("attributes") {
            serde_json::Value::Null => serde_json::Map::new(),
            serde_json::Value::Object(map) => map,
            other => return Err(invalid_argument(format!("attributes must be a dict, not {other}"))),
        },
        dimension_names: serde_json::from_value(field("dimension_names"))
            .map_err(|e| invalid_argument(format!("dimension_names must be names or None: {e}")))?,
        filters: match field("filters") {
            serde_json::Value::Null => Vec::new(),
            serde_json::Value::Array(filters) => filters,
            other => return Err(invalid_argument(format!("filters must be a list, not {other}"))),
        },
    };
    let options = storage_options.unwrap_or_default();
    let array = interruptible(py, || create_array(&url, &new, &options))?;
    Ok(ReaderArray::opened(array, url, options))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(write_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(write_chunks_async, m)?)?;
    m.add_function(wrap_pyfunction!(create_array_metadata, m)?)?;
    Ok(())
}
