//! The chunk-parallel reader (`zarrs_nvcomp.reader`): [`ReaderArray`] is an
//! opened zarr array, whose `read` returns a [`HostBatch`] (host memory, one
//! buffer) or a [`CudaArray`] (device memory). Python turns the selection
//! into strided ranges and the bytes into NumPy or CuPy arrays.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use zarrs::array::ArraySubset;
use zarrs::plugin::{ExtensionName, ZarrVersion};
use zarrs::storage::AsyncListableStorageTraits;
use zarrs_nvcomp::cuda::DeviceRegion;
use zarrs_nvcomp::reader::{
    batched_algorithm, block_on_checked, open_array, read_boxes, read_chunks_parallel, read_chunks_parallel_into,
    reopen_store, ArrayData, LentDevice, ObjectStoreArray, Progress, ProgressHook, ReadError, ReadInto, ReadOptions,
    Selection, StoreIo, StridedRange,
};
use zarrs_nvcomp::writer::{resize, store_attributes};

use crate::awaitable::awaitable;
use crate::cuda_array::CudaArray;
use crate::errors::{invalid_argument, parse_device, read_error, write_error};
use crate::host_batch::HostBatch;
use crate::signals::CHECK_INTERVAL;
use crate::{config, dtype, logging};

/// Runs the future that `work` makes with the GIL released, taking the GIL
/// back every [`CHECK_INTERVAL`] to run the signal handlers: an
/// exception they raise (`KeyboardInterrupt` for Ctrl-C) cancels the work
/// and is raised. (The future is made on the thread that runs it, so it
/// need not be `Send`.) The reader and the writer run their work this way.
pub(crate) fn run_interruptible<T: Send, F: Future<Output = T>>(
    py: Python<'_>,
    work: impl FnOnce() -> F + Send,
) -> PyResult<T> {
    py.detach(|| block_on_checked(work(), CHECK_INTERVAL, || Python::attach(|py| py.check_signals())))
}

/// [`run_interruptible`] for the reader's work.
fn interruptible<T: Send, F: Future<Output = Result<T, ReadError>>>(
    py: Python<'_>,
    work: impl FnOnce() -> F + Send,
) -> PyResult<T> {
    run_interruptible(py, work)?.map_err(read_error)
}

/// The selection of `(start, stop, step)` per axis.
fn strided(selection: Vec<(u64, u64, u64)>) -> Selection {
    Selection::new(
        selection
            .into_iter()
            .map(|(start, stop, step)| StridedRange { start, stop, step })
            .collect(),
    )
}

/// Reads `selection` into new memory (the data returned) or into `out`
/// (`None` returned).
async fn read_to(
    array: &ObjectStoreArray,
    selection: Selection,
    options: &ReadOptions,
    out: Option<ReadInto<'_>>,
) -> Result<Option<ArrayData>, ReadError> {
    match out {
        None => read_chunks_parallel(array, selection, options).await.map(Some),
        Some(out) => read_chunks_parallel_into(array, selection, options, out)
            .await
            .map(|()| None),
    }
}

/// The memory a read is lent: `host` (a writable, C-contiguous `uint8`
/// buffer) or `device` (an address and a length).
///
/// # Safety
/// `device` must be writable device memory that stays allocated, and
/// untouched by anything else, while the read runs.
pub(crate) unsafe fn lent_output<'a>(
    host: Option<&'a PyBuffer<u8>>,
    device: Option<(u64, usize)>,
) -> PyResult<Option<ReadInto<'a>>> {
    match (host, device) {
        (Some(_), Some(_)) => Err(invalid_argument("give host_out or device_out, not both")),
        (Some(buffer), None) => {
            if buffer.readonly() {
                return Err(invalid_argument("out is read-only"));
            }
            if !buffer.is_c_contiguous() {
                return Err(invalid_argument("out is not C-contiguous"));
            }
            // SAFETY: a writable, contiguous buffer that the caller's
            // `PyBuffer` keeps exported (NumPy cannot resize or free it) for
            // the borrow; the Python caller must not touch it meanwhile, as
            // with NumPy's own `out=`.
            let bytes = unsafe { std::slice::from_raw_parts_mut(buffer.buf_ptr().cast::<u8>(), buffer.len_bytes()) };
            Ok(Some(ReadInto::Host(bytes)))
        }
        // SAFETY: the caller vouches for the memory.
        (None, Some((ptr, len))) => Ok(Some(ReadInto::Device(unsafe {
            LentDevice::new(DeviceRegion { ptr, len })
        }))),
        (None, None) => Ok(None),
    }
}

/// [`interruptible`] for a read that reports its progress: the latest
/// [`Progress`] goes to `callback(decoded_bytes, total_bytes)` on this thread,
/// with the GIL, each time the signals are checked and once at the end; an
/// exception the callback raises cancels the read and is raised.
fn read_reporting(
    py: Python<'_>,
    callback: &Py<PyAny>,
    array: &ObjectStoreArray,
    selection: Selection,
    options: ReadOptions,
    out: Option<ReadInto<'_>>,
) -> PyResult<Option<ArrayData>> {
    // The hook runs on the read's threads: it only keeps the latest value.
    let latest: Arc<Mutex<Option<Progress>>> = Arc::default();
    let options = options.with_progress(ProgressHook::new({
        let latest = latest.clone();
        move |p| *latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(p)
    }));
    let report = |py: Python<'_>| -> PyResult<()> {
        let progress = latest.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(p) = progress {
            callback.call1(py, (p.decoded_bytes, p.total_bytes))?;
        }
        Ok(())
    };
    let data = py
        .detach(|| {
            block_on_checked(read_to(array, selection, &options, out), CHECK_INTERVAL, || {
                Python::attach(|py| {
                    py.check_signals()?;
                    report(py)
                })
            })
        })?
        .map_err(read_error)?;
    report(py)?;
    Ok(data)
}

/// A zarr array opened for reading.
#[pyclass(frozen, module = "zarrs_nvcomp._zarrs_nvcomp")]
pub(crate) struct ReaderArray {
    array: ObjectStoreArray,
    url: String,
    /// The storage options, to open the store again in a forked child.
    options: HashMap<String, String>,
    /// The fork generation of the process that opened it.
    generation: u64,
}

impl ReaderArray {
    /// In a forked child, the array over a store client of this process (a
    /// network client's connections and tasks belong to the runtime of the
    /// process that opened it, which the child does not have); `None` in the
    /// process that opened it.
    fn in_this_process(&self) -> PyResult<Option<ObjectStoreArray>> {
        if self.generation == zarrs_nvcomp::fork::generation() {
            return Ok(None);
        }
        reopen_store(&self.array, &self.url, &self.options)
            .map(Some)
            .map_err(read_error)
    }
}

impl ReaderArray {
    /// `array`, opened at `url` with `options` (by this process).
    pub(crate) fn opened(array: ObjectStoreArray, url: String, options: HashMap<String, String>) -> Self {
        Self {
            array,
            url,
            options,
            generation: zarrs_nvcomp::fork::generation(),
        }
    }
}

#[pymethods]
impl ReaderArray {
    /// Opens the array at `url` (a path, `file://`, `s3://`, `http(s)://`)
    /// with object_store options.
    #[staticmethod]
    #[pyo3(signature = (url, storage_options=None))]
    fn open(py: Python<'_>, url: String, storage_options: Option<HashMap<String, String>>) -> PyResult<Self> {
        logging::refresh();
        let options = storage_options.unwrap_or_default();
        let array = interruptible(py, || open_array(&url, &options))?;
        Ok(Self::opened(array, url, options))
    }

    /// [`Self::open`] as an asyncio future of `event_loop` (the caller's
    /// running loop), resolved from the library's runtime
    /// ([`crate::awaitable`]).
    #[staticmethod]
    #[pyo3(signature = (event_loop, url, storage_options=None))]
    fn open_async(
        py: Python<'_>,
        event_loop: &Bound<'_, PyAny>,
        url: String,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Py<PyAny>> {
        logging::refresh();
        let options = storage_options.unwrap_or_default();
        let (at, with) = (url.clone(), options.clone());
        let open = move || async move { open_array(&at, &with).await.map_err(read_error) };
        awaitable(py, event_loop, open, move |py, array| {
            Ok(Py::new(py, Self::opened(array, url, options))?.into_any())
        })
    }

    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.array.shape().to_vec()
    }

    /// The zarr v3 name of the data type (also for v2 arrays).
    #[getter]
    fn data_type(&self) -> String {
        self.array
            .data_type()
            .name(ZarrVersion::V3)
            .map_or_else(|| format!("{:?}", self.array.data_type()), |n| n.into_owned())
    }

    /// The NumPy type string of the elements, or None for data types NumPy lacks.
    #[getter]
    fn typestr(&self) -> Option<String> {
        dtype::typestr(self.array.data_type())
    }

    /// The array's metadata (v2 `.zarray` or v3 `zarr.json`) as a dict.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = serde_json::to_value(self.array.metadata()).map_err(|e| invalid_argument(e.to_string()))?;
        config::to_python(py, &json)
    }

    /// The algorithm that decodes the chunks in batches (`blosc-lz4` and the
    /// like for blosc chunks), or None when they go through the zarrs
    /// pipeline (see `fallback_reason`).
    #[getter]
    fn batched_algorithm(&self) -> Option<&'static str> {
        batched_algorithm(&self.array).ok().map(|a| a.name())
    }

    /// Why the chunks go through the zarrs pipeline, or None when they are batched.
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        batched_algorithm(&self.array).err()
    }

    /// The fill value's element in native byte order, as zarrs parsed it
    /// from the metadata: Python reads it with the array's dtype.
    #[getter]
    fn fill_value_bytes(&self) -> &[u8] {
        self.array.fill_value().as_ne_bytes()
    }

    /// Replaces the array's attributes in its store with the JSON object
    /// `attributes_json` (`zarrs_nvcomp::writer::store_attributes`).
    fn store_attributes(&self, py: Python<'_>, attributes_json: &str) -> PyResult<()> {
        let attributes: serde_json::Map<String, serde_json::Value> = serde_json::from_str(attributes_json)
            .map_err(|e| invalid_argument(format!("attributes must be a JSON object: {e}")))?;
        run_interruptible(py, || store_attributes(&self.array, attributes))?.map_err(write_error)
    }

    /// Changes the array's shape to `shape`, removing the chunks wholly
    /// outside it first (`zarrs_nvcomp::writer::resize`).
    fn resize(&self, py: Python<'_>, shape: Vec<u64>) -> PyResult<()> {
        run_interruptible(py, || resize(&self.array, &shape))?.map_err(write_error)
    }

    /// The bytes of every object stored under the array (its metadata, its
    /// chunks or shards), listed from its store.
    fn nbytes_stored(&self, py: Python<'_>) -> PyResult<u64> {
        let storage = self.array.storage();
        let listed = run_interruptible(py, || storage.size())?;
        listed.map_err(|source| {
            read_error(ReadError::Store {
                url: self.url.clone(),
                source: source.into(),
            })
        })
    }

    /// Reads `selection`, `(start, stop, step)` per axis with steps of at
    /// least 1: a [`HostBatch`] of one buffer, or a [`CudaArray`] where the
    /// result is on the GPU; the result has the selection's shape.
    /// `progress(decoded_bytes, total_bytes)` is called on this thread as the
    /// read advances, with the GIL; an exception it raises stops the read.
    ///
    /// With `host_out` (a writable, C-contiguous `uint8` buffer, read on the
    /// CPU) or `device_out` (`(address, length)` of device memory of the
    /// read's GPU, which the caller keeps allocated and untouched, the
    /// producer's stream already waited for) the result is written there,
    /// every byte of it, and None is returned. The GIL is released while
    /// the read writes: the caller must not free, resize or use the memory
    /// meanwhile.
    #[pyo3(signature = (selection, device=None, max_concurrent_requests=None, wave_bytes=None, trusted_input=false, max_decoded_size=None, progress=None, host_out=None, device_out=None))]
    // One parameter per Python keyword argument of the read.
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        py: Python<'_>,
        selection: Vec<(u64, u64, u64)>,
        device: Option<&str>,
        max_concurrent_requests: Option<usize>,
        wave_bytes: Option<usize>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
        progress: Option<Py<PyAny>>,
        host_out: Option<PyBuffer<u8>>,
        device_out: Option<(u64, usize)>,
    ) -> PyResult<Py<PyAny>> {
        let options = self.read_options(
            device,
            max_concurrent_requests,
            wave_bytes,
            trusted_input,
            max_decoded_size,
        )?;
        let selection = strided(selection);
        let typestr = self.typestr();
        let reopened = self.in_this_process()?;
        let array = reopened.as_ref().unwrap_or(&self.array);
        // SAFETY: the Python caller keeps `device_out` allocated and
        // untouched while this call runs (documented above).
        let out = unsafe { lent_output(host_out.as_ref(), device_out)? };
        let data = match progress {
            None => interruptible(py, || read_to(array, selection, &options, out))?,
            Some(callback) => read_reporting(py, &callback, array, selection, options, out)?,
        };
        match data {
            None => Ok(py.None()),
            Some(data) => data_to_python(py, data, typestr),
        }
    }

    /// [`Self::read`] of `selection` as an asyncio future of `event_loop`
    /// (the caller's running loop) that the read resolves from the library's
    /// local runner: no thread waits for it, and cancelling the future stops
    /// the read ([`crate::awaitable`]). Into new memory, or into `host_out`
    /// or `device_out` as [`Self::read`] (the future's value is then None);
    /// the task holds `host_out` and `keep_alive` (the owner of
    /// `device_out`) until it ends, cancelled or not.
    #[pyo3(signature = (event_loop, selection, device=None, max_concurrent_requests=None, trusted_input=false, max_decoded_size=None, host_out=None, device_out=None, keep_alive=None))]
    // One parameter per Python keyword argument of the read.
    #[allow(clippy::too_many_arguments)]
    fn read_async(
        &self,
        py: Python<'_>,
        event_loop: &Bound<'_, PyAny>,
        selection: Vec<(u64, u64, u64)>,
        device: Option<&str>,
        max_concurrent_requests: Option<usize>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
        host_out: Option<PyBuffer<u8>>,
        device_out: Option<(u64, usize)>,
        keep_alive: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let options = self.read_options(device, max_concurrent_requests, None, trusted_input, max_decoded_size)?;
        let selection = strided(selection);
        let typestr = self.typestr();
        let array = match self.in_this_process()? {
            Some(reopened) => reopened,
            None => self.array.with_storage(self.array.storage()),
        };
        // Checked now: the caller's errors are raised by the call.
        // SAFETY: only checked, not written through.
        unsafe { lent_output(host_out.as_ref(), device_out) }?;
        let read = move || async move {
            let _owner = keep_alive;
            // SAFETY: the task holds `host_out` and the owner of
            // `device_out`, which the caller leaves untouched while it runs.
            let out = unsafe { lent_output(host_out.as_ref(), device_out) }?;
            read_to(&array, selection, &options, out).await.map_err(read_error)
        };
        awaitable(py, event_loop, read, move |py, data| match data {
            None => Ok(py.None()),
            Some(data) => data_to_python(py, data, typestr),
        })
    }

    /// Reads `boxes`, `(start, stop)` per axis each, in one read (their
    /// chunks fetched and decoded together): every box's elements in C
    /// order, back to back, as one buffer (a [`HostBatch`] or a
    /// [`CudaArray`]). Orthogonal and coordinate selections are read so.
    #[pyo3(signature = (boxes, device=None, max_concurrent_requests=None, trusted_input=false, max_decoded_size=None))]
    fn read_boxes(
        &self,
        py: Python<'_>,
        boxes: Vec<Vec<(u64, u64)>>,
        device: Option<&str>,
        max_concurrent_requests: Option<usize>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        let options = self.read_options(device, max_concurrent_requests, None, trusted_input, max_decoded_size)?;
        let boxes: Vec<ArraySubset> = boxes
            .iter()
            .map(|ranges| ArraySubset::new_with_ranges(&ranges.iter().map(|&(a, b)| a..b).collect::<Vec<_>>()))
            .collect();
        let reopened = self.in_this_process()?;
        let array = reopened.as_ref().unwrap_or(&self.array);
        let data = interruptible(py, || read_boxes(array, boxes, &options))?;
        data_to_python(py, data, self.typestr())
    }

    fn __repr__(&self) -> String {
        format!(
            "ReaderArray({:?}, shape={:?}, data_type={})",
            self.url,
            self.array.shape(),
            self.data_type()
        )
    }
}

impl ReaderArray {
    /// The options of a read of this array from Python's arguments.
    fn read_options(
        &self,
        device: Option<&str>,
        max_concurrent_requests: Option<usize>,
        wave_bytes: Option<usize>,
        trusted_input: bool,
        max_decoded_size: Option<u64>,
    ) -> PyResult<ReadOptions> {
        logging::refresh();
        let defaults = ReadOptions::default();
        let mut options = ReadOptions::default()
            .with_device(parse_device(device)?)
            .with_max_concurrent_requests(max_concurrent_requests.unwrap_or(defaults.max_concurrent_requests))
            .with_wave_bytes(wave_bytes.unwrap_or(defaults.wave_bytes))
            .with_store_io(StoreIo::for_url(&self.url))
            .with_trusted_input(trusted_input);
        options.max_decoded_size = max_decoded_size;
        Ok(options)
    }
}

/// A read's data as Python sees it: a [`HostBatch`] of one buffer, or a
/// [`CudaArray`] of elements of `typestr`.
fn data_to_python(py: Python<'_>, data: ArrayData, typestr: Option<String>) -> PyResult<Py<PyAny>> {
    // The output's size was checked before it was allocated.
    let nbytes = data.num_bytes();
    match data {
        ArrayData::Host { bytes, .. } => Ok(Py::new(py, HostBatch::from_vec(bytes))?.into_any()),
        ArrayData::Device { buffer, shape, .. } => {
            let device = buffer.engine().device();
            let array = CudaArray::bytes(Arc::new(buffer), 0, nbytes, device)
                .with_elements(shape, typestr.unwrap_or_else(|| "|V1".into()));
            Ok(Py::new(py, array)?.into_any())
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ReaderArray>()?;
    m.add(
        "DEFAULT_MAX_METADATA_SIZE",
        zarrs_nvcomp::reader::DEFAULT_MAX_METADATA_SIZE,
    )
}
