//! Device output: [`DeviceArray`], the result of a read to the GPU,
//! [`DeviceOutput`], the memory a read to the GPU writes (a new
//! [`DeviceArray`], or the caller's), and [`DeviceWaves`], the GPU's
//! [`WaveDecoder`] into it, which decodes each wave with one nvCOMP batch
//! call and scatters the items with one kernel launch
//! ([`CudaEngine::decode_scatter`]).

use std::sync::Arc;

use zarrs::array::DataType;

use super::fetch::ArenaSource;
use super::wave::{WaveCodec, WaveDecoder};
use super::ArrayData;
use crate::algorithm::Algorithm;
use crate::array::chain::Filters;
use crate::array::device_array::{cuda_error, DeviceArray};
use crate::array::error::ReadError;
use crate::array::wave_item::{fill_is_zero, item_error, WaveItem};
use crate::cuda::{CudaEngine, DecodeOptions, DeviceRegion, RowCopy, Scatter};

/// The device memory a read writes: a new [`DeviceArray`] (zeroed), or
/// memory lent by the caller (whatever it holds).
pub(crate) struct DeviceOutput {
    engine: Arc<CudaEngine>,
    region: DeviceRegion,
    /// The read's own memory; `None` where it is lent.
    owned: Option<DeviceArray>,
}

impl DeviceOutput {
    /// A new output of `shape` (`len` zeroed bytes) on `engine`'s device, or
    /// [`ReadError::OutputTooLarge`].
    pub(super) fn allocate(engine: Arc<CudaEngine>, shape: &[u64], len: usize) -> Result<Self, ReadError> {
        let array = DeviceArray::allocate(engine.clone(), shape, len)?;
        Ok(Self {
            engine,
            region: array.region(),
            owned: Some(array),
        })
    }

    /// The caller's memory `region`.
    ///
    /// # Safety
    /// `region` must be writable device memory of `engine`'s device that
    /// stays allocated, and untouched by anything else, for as long as the
    /// output is written.
    pub(super) unsafe fn lent(engine: Arc<CudaEngine>, region: DeviceRegion) -> Self {
        Self {
            engine,
            region,
            owned: None,
        }
    }

    /// Copies `bytes` to the start of the output; returns when they are there.
    pub(super) fn upload(&self, bytes: &[u8]) -> Result<(), ReadError> {
        assert!(bytes.len() <= self.region.len, "upload beyond the output");
        if bytes.is_empty() {
            return Ok(());
        }
        self.engine
            .context()
            .bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        let stream = self.engine.stream();
        // SAFETY: the region is writable device memory of this engine, used
        // by nothing else while the read runs (`allocate`, `lent`), and holds
        // the bytes (asserted above); the stream is synchronised before the
        // host bytes may go.
        unsafe { cudarc::driver::result::memcpy_htod_async(self.region.ptr, bytes, stream.cu_stream()) }
            .map_err(cuda_error("cuMemcpyHtoDAsync"))?;
        stream.synchronize().map_err(cuda_error("cuStreamSynchronize"))
    }

    /// The result of a read of `shape` into this output: the array where it
    /// is the read's own, `None` where the memory is lent.
    pub(super) fn into_data(self, shape: Vec<u64>, data_type: DataType) -> Option<ArrayData> {
        self.owned.map(|buffer| ArrayData::Device {
            buffer,
            shape,
            data_type,
        })
    }
}

/// The GPU's [`WaveDecoder`]: each wave is one nvCOMP batch call (in a
/// worker process unless the input is trusted) whose decoded buffers are
/// scattered into the output, with the fill value where items are missing,
/// by one kernel launch; the decoded batch lives only until then. Waves of
/// blosc chunks are decoded by [`crate::blosc::plan`].
pub(crate) struct DeviceWaves {
    codec: WaveCodec,
    options: DecodeOptions,
    out: DeviceOutput,
    fill: Vec<u8>,
    /// The chain's filters: its element filters undone on each decoded
    /// item, which its `fixedscaleoffset` then widens, before it is placed.
    filters: Filters,
}

impl DeviceWaves {
    /// A decoder of `codec` into `out`, on its engine; the places of
    /// missing items get `fill` (one element).
    pub(super) fn new(codec: WaveCodec, options: DecodeOptions, out: DeviceOutput, fill: Vec<u8>) -> Self {
        Self {
            codec,
            options,
            out,
            fill,
            filters: Filters::default(),
        }
    }

    /// The decoder, undoing the chain's `filters` on each decoded item (one
    /// kernel launch per wave each) before it is placed.
    pub(super) fn with_filters(self, filters: Filters) -> Self {
        Self { filters, ..self }
    }

    /// The output.
    pub(super) fn into_output(self) -> DeviceOutput {
        self.out
    }
}

impl WaveDecoder for DeviceWaves {
    fn arenas(&self) -> Option<ArenaSource> {
        let engine = self.out.engine.clone();
        Some(Arc::new(move |capacity| match engine.fetch_arena(capacity) {
            Ok(arena) => arena,
            Err(e) => {
                log::debug!("zarrs-nvcomp reader: fetching into ordinary memory, no pinned arena: {e}");
                None
            }
        }))
    }

    fn decode_wave(&self, wave: &[WaveItem<'_>]) -> Result<(), ReadError> {
        let out = &self.out;
        match &self.codec {
            WaveCodec::Algorithm(algorithm) => self.decode_streams(algorithm, wave),
            // A new output starts zeroed; lent memory may hold anything.
            WaveCodec::Blosc => crate::blosc::plan::decode_on_device(
                &out.engine,
                out.region,
                (&self.fill, out.owned.is_some()),
                (self.options, self.filters.elements, self.filters.scale_offset),
                wave,
            ),
        }
    }
}

impl DeviceWaves {
    /// Decodes a wave of streams of `algorithm` with one batch call.
    fn decode_streams(&self, algorithm: &Algorithm, wave: &[WaveItem<'_>]) -> Result<(), ReadError> {
        let mut streams = Vec::with_capacity(wave.len());
        let mut keys = Vec::with_capacity(wave.len());
        let mut scatter = Scatter {
            fill_value: self.fill.clone(),
            filters: self.filters.elements,
            scale_offset: self.filters.scale_offset,
            ..Scatter::default()
        };
        for item in wave {
            match item.stream {
                Some(stream) => {
                    let buffer = streams.len();
                    streams.push(stream);
                    keys.push(item.key);
                    scatter.decoded_lens.push(item.decoded_len);
                    scatter.adler32.extend(item.adler32.map(|stored| (buffer, stored)));
                    item.place.row_copies(|rows| scatter.copies.push((buffer, rows)));
                }
                // A new output starts zeroed; lent memory may hold anything.
                None if self.out.owned.is_some() && fill_is_zero(&self.fill) => {}
                // Every row reads the fill value from its start.
                None => item.place.row_copies(|rows| {
                    scatter.fills.push(RowCopy {
                        src_offset: 0,
                        src_pitch: 0,
                        ..rows
                    });
                }),
            }
        }
        let out = &self.out;
        // SAFETY: the output is device memory of its engine, owned by this
        // decoder for the whole read or lent to it, untouched by anything
        // else, while the read runs; the places of a read's items do not
        // overlap, and waves are decoded one after the other.
        unsafe {
            out.engine
                .decode_scatter(algorithm, &streams, &scatter, out.region, self.options)
        }
        .map_err(|e| item_error(e, |i| keys[i].to_string()))
    }
}
