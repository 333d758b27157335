"""Type stubs of the Rust extension ``zarrs_nvcomp._zarrs_nvcomp``.

Configurations cross as dicts (``{"algorithm": ..., "options": {...}}``),
device names as strings parsed by `parse_device`, host buffers through
the buffer protocol, device buffers as ``(pointer, length)`` pairs or one
packed region plus item sizes (a buffer of native ``uint64``).
"""

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, final, overload

# collections.abc.Buffer is new in Python 3.12; the package supports 3.11.
from typing_extensions import Buffer

#: Every algorithm name the codec takes.
ALGORITHMS: list[str]
#: The algorithms with a CPU implementation (the others need a GPU).
CPU_ALGORITHMS: list[str]
#: The reader's default bound on the bytes of a metadata document.
DEFAULT_MAX_METADATA_SIZE: int

class ZarrsNvcompError(Exception):
    """The base of every exception zarrs_nvcomp raises."""

class DecodeError(ZarrsNvcompError, RuntimeError):
    """A buffer of a batch (or a chunk of an array) cannot be decoded; the message names it."""

class GpuUnavailableError(ZarrsNvcompError, RuntimeError):
    """The CUDA backend was asked for and cannot be used; the message says why."""

class CudaError(ZarrsNvcompError, RuntimeError):
    """A CUDA driver or nvCOMP call failed."""

class StoreError(ZarrsNvcompError, OSError):
    """The store cannot be read, holds no array at that path, or a chunk cannot be fetched."""

class ArrayNotFoundError(StoreError, FileNotFoundError):
    """The store holds no array at that path (nothing, or no metadata document).

    Also a ``zarr.errors.ArrayNotFoundError`` where zarr is installed."""

class NodeTypeValidationError(StoreError):
    """The store holds a group, not an array, at that path; the message names the group's arrays.

    Also a ``zarr.errors.NodeTypeValidationError`` where zarr is installed."""

class StoreTimeoutError(ZarrsNvcompError, TimeoutError):
    """A store did not answer within the time the storage options allow."""

class InvalidArgumentError(ZarrsNvcompError, ValueError):
    """An argument, option or configuration is invalid; the message names it and what is valid."""

class UnsupportedTypeError(ZarrsNvcompError, TypeError):
    """An argument or a data type is of a kind the package does not take."""

class SelectionError(ZarrsNvcompError, IndexError):
    """A selection is malformed or out of the array's bounds."""

class OutOfMemoryError(ZarrsNvcompError, MemoryError):
    """A result does not fit in the memory it is to be written to; the message names its size."""

class ContainsArrayError(ZarrsNvcompError, ValueError):
    """``create_array`` found an array at the store, and ``overwrite`` was not set.

    Also a ``zarr.errors.ContainsArrayError`` where zarr is installed."""

class ContainsGroupError(ZarrsNvcompError, ValueError):
    """``create_array`` found a group at the store, and ``overwrite`` was not set.

    Also a ``zarr.errors.ContainsGroupError`` where zarr is installed."""

def parse_device(device: str) -> str:
    """The normalized spelling of a device name: ``"auto"`` (also ``""``),
    ``"cpu"``, ``"cuda:N"`` (``"cuda"`` and ``"gpu"`` are ``"cuda:0"``);
    `InvalidArgumentError` otherwise. The package's one device parser."""

def gpu_unavailable_reason(device: int = 0) -> str | None:
    """Why CUDA device ``device`` cannot be used, or None when it can."""

def set_nvcomp_library_path(path: str) -> None:
    """Names the nvCOMP library to try right after ``NVCOMP_LIBRARY``; raises
    `CudaError` once nvCOMP was looked for."""

def nvcomp_library_candidates() -> list[str]:
    """The files the loader tries for nvCOMP, in order."""

def nvcomp_library_path() -> str | None:
    """The file nvCOMP was opened from (opening it now if it was not yet; this
    needs no GPU), or None when it cannot be opened."""

def default_max_decoded_size() -> int:
    """The default limit on a buffer's decoded size for host outputs: the machine's memory."""

def normalize_config(config: dict[str, Any], stored: bool = False) -> dict[str, Any]:
    """Parses ``{"algorithm": ..., "options": {...}}``; returns it with every option written out.

    ``stored``: the configuration comes from metadata, which kvikio may have
    written, so options left out take kvikio's defaults (bare GDeflate).
    """

def has_cpu_implementation(config: dict[str, Any]) -> bool:
    """Whether the algorithm a configuration names has a CPU implementation."""

def check_disjoint(inputs: DeviceRegions, outputs: DeviceRegions) -> None:
    """Raises `InvalidArgumentError` when an output region overlaps
    another output or an input."""

@final
class DeviceRegions:
    """The device regions of a batch's buffers, read by `read_device_regions`."""

    @property
    def regions(self) -> list[tuple[int, int]]:
        """The ``(address, length)`` of each buffer."""
    @property
    def streams(self) -> list[int]:
        """The nonzero streams the buffers' interfaces named, each once: wait for them."""
    @property
    def read_cupy_fields(self) -> bool:
        """Whether a CuPy array was read through its fields (no stream named: CuPy's current)."""
    def __len__(self) -> int:
        """The number of buffers."""

def read_device_regions(
    objects: list[Any], what: str, cupy_ndarray: type | None = None
) -> DeviceRegions:
    """Reads the address and size of every device array: instances of
    ``cupy_ndarray`` and `CudaArray` through their fields, others through
    ``__cuda_array_interface__`` (v3). Errors name ``what`` and the index:
    `InvalidArgumentError` (not contiguous, masked, malformed),
    `UnsupportedTypeError` (no interface)."""

def device_regions_at(ptr: int, ranges: Buffer) -> DeviceRegions:
    """The regions of items of one device buffer at ``ptr``: item ``i`` at bytes
    ``ranges[2i]:ranges[2i + 1]`` (native ``uint64``), made without a Python
    object per item. `InvalidArgumentError` for an item that ends
    before it starts."""

def classify_chain(metadata_json: str) -> dict[str, Any]:
    """How the reader decodes the chunks of the array whose metadata (a
    ``zarr.json`` or v2 ``.zarray`` document) is ``metadata_json``:
    ``batched`` (the codec's name, None where zarrs' pipeline decodes them),
    ``fallback_reason``, ``config`` (the engine configuration of an
    algorithm, None for blosc), ``framing``, ``filters``, ``sharded``,
    ``compressor``, ``decodes_stored``, ``encodes_stored`` and ``chain``
    (the verdict, a `StoredChain`). `InvalidArgumentError`
    where the metadata is not an array's zarrs opens."""

@final
class StoredChain:
    """The reader's verdict on a chain, for `decode_stored_into` and
    `encode_stored`; pickled as its metadata."""

    def __new__(cls, metadata_json: str) -> StoredChain: ...
    def __getnewargs__(self) -> tuple[str]: ...
    @property
    def codec(self) -> str | None:
        """The compressor's name in the metadata (the batched codec's where
        the metadata names none), for messages; None where the chain falls back."""
    @property
    def decodes_stored(self) -> bool:
        """Whether whole stored chunks decode here in batches."""
    @property
    def encodes_stored(self) -> bool:
        """Whether chunks encode here in batches."""
    @property
    def order(self) -> list[int] | None:
        """The chunk's dimensions in stored order; None for C order."""

def _set_gpu_worker_command(command: Sequence[str]) -> None:
    """Sets the command that starts the GPU decoding worker process."""

def _serve_gpu_worker() -> None:
    """Runs this process as the GPU decoding worker until its input closes."""

@final
class HostBatch(Buffer):
    """Host buffers in one allocation (writable buffer protocol, ``uint8``),
    buffer ``i`` at bytes ``offsets[i]:offsets[i + 1]``. A decoded batch's
    allocation backs a later batch once every view of it has gone."""

    @property
    def offsets(self) -> list[int]:
        """The ``len + 1`` offsets of the buffers into the data."""
    def offsets_buffer(self) -> HostBatch:
        """The offsets as one buffer of native ``uint64`` (``numpy.frombuffer``)."""
    def __len__(self) -> int:
        """The number of buffers."""
    def to_bytes_list(self) -> list[bytes]:
        """Each buffer as its own ``bytes``."""
    def __buffer__(self, flags: int, /) -> memoryview: ...

def split_device(owner: object, ptr: int, len: int, sizes: Buffer, device: int) -> list[CudaArray]:
    """The ``len`` bytes at ``ptr`` on ``device``, which ``owner`` keeps alive,
    as consecutive 1-D ``uint8`` views of ``sizes`` (native ``uint64``, adding
    up to ``len``) bytes each; every view keeps ``owner`` alive."""

@final
class DeviceBatch:
    """Device buffers in one device allocation, freed with this object and its views."""

    @property
    def ptr(self) -> int:
        """Device address of the allocation."""
    @property
    def device(self) -> int:
        """CUDA device ordinal."""
    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The ``(start, end)`` byte range of each buffer; in order, maybe with alignment gaps."""
    def ranges_buffer(self) -> HostBatch:
        """The ranges as one buffer of native ``uint64``, start then end of each
        buffer (``numpy.frombuffer(...).reshape(-1, 2)``), without a Python int each."""
    @property
    def nbytes(self) -> int:
        """Size of the whole allocation in bytes."""
    @property
    def is_packed(self) -> bool:
        """Whether the buffers lie back to back from the start, without gaps."""
    def arrays(self) -> list[CudaArray]:
        """Each buffer as a 1-D ``uint8`` `CudaArray` view."""
    def span(self) -> CudaArray:
        """Bytes from the start to the last buffer's end (the packed batch when ``is_packed``)."""
    def __len__(self) -> int:
        """The number of buffers."""

@final
class Engine:
    """One batch codec of the engine on one backend.

    Host calls release the GIL; those of 1 MiB of input or more run on a
    thread of their own while the caller's thread delivers signals every
    100 ms, so Ctrl-C raises ``KeyboardInterrupt`` within about that time (the
    interrupted batch ends in the background, its result dropped). Device
    calls are not interrupted: the GPU reads memory the caller owns.

    Given an ``event_loop``, ``encode``, ``decode`` and ``device_batch``
    return a future of that loop instead, resolved by the library's own task
    (the work runs on a thread of the library, not Python's); cancelling it
    drops the result (the batch ends in the background, holding its inputs
    and ``keep_alive`` until then).
    """

    def __new__(
        cls,
        config: dict[str, Any],
        device: str | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
    ) -> Engine:
        """``config``: ``{"algorithm": ..., "options": {...}}``; ``device``:
        None, ``"cpu"``, ``"cuda"``, ``"cuda:N"``; ``max_decoded_size``: the
        largest decoded size a buffer may declare (None: what the destination holds)."""
    @property
    def backend(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
    @property
    def max_decoded_size(self) -> int:
        """The largest decoded size a buffer decoded into host memory may declare."""
    @property
    def max_device_decoded_size(self) -> int:
        """The largest decoded size a buffer decoded into device memory may declare."""
    @property
    def device_ordinal(self) -> int | None:
        """The CUDA device ordinal, or None on the CPU."""
    def config(self) -> dict[str, Any]:
        """The normalized configuration."""
    @overload
    def encode(self, inputs: Sequence[Buffer], event_loop: None = None) -> HostBatch:
        """Compresses host buffers."""
    @overload
    def encode(
        self, inputs: Sequence[Buffer], event_loop: asyncio.AbstractEventLoop
    ) -> asyncio.Future[HostBatch]: ...
    @overload
    def decode(self, inputs: Sequence[Buffer], event_loop: None = None) -> HostBatch:
        """Decompresses host buffers."""
    @overload
    def decode(
        self, inputs: Sequence[Buffer], event_loop: asyncio.AbstractEventLoop
    ) -> asyncio.Future[HostBatch]: ...
    def encode_packed(self, data: Buffer, sizes: Buffer) -> HostBatch:
        """Compresses the items of one packed host buffer, ``sizes`` (``uint64``) bytes each."""
    def decode_packed(self, data: Buffer, sizes: Buffer) -> HostBatch:
        """Decompresses the items of one packed host buffer."""
    def decode_into(self, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> None:
        """Decompresses host buffers into as many writable, disjoint host buffers."""
    @overload
    def device_batch(
        self,
        inputs: DeviceRegions,
        encode: bool,
        event_loop: None = None,
        keep_alive: None = None,
    ) -> DeviceBatch:
        """Compresses (``encode``) or decompresses device buffers
        (``keep_alive``: the owners of their memory, held by an awaited call
        until its work ends)."""
    @overload
    def device_batch(
        self,
        inputs: DeviceRegions,
        encode: bool,
        event_loop: asyncio.AbstractEventLoop,
        keep_alive: Any = None,
    ) -> asyncio.Future[DeviceBatch]: ...
    def device_packed(self, ptr: int, len: int, sizes: Buffer, encode: bool) -> DeviceBatch:
        """Compresses (``encode``) or decompresses the items of one packed
        device region, ``sizes`` (``uint64``) bytes each."""
    def decode_device_into(self, inputs: DeviceRegions, outputs: DeviceRegions) -> None:
        """Decompresses device buffers into as many disjoint device buffers."""

def decode_stored_into(
    chain: StoredChain,
    inputs: Sequence[Buffer],
    keys: Sequence[str],
    offsets: Sequence[int],
    sizes: Sequence[int],
    device: str,
    event_loop: asyncio.AbstractEventLoop,
    host_out: Buffer | None = None,
    device_out: tuple[int, int] | None = None,
    keep_alive: Any = None,
) -> asyncio.Future[None]:
    """Decodes stored chunks of ``chain`` (framing and checksums included) in
    one batch as the reader does, chunk ``i`` into bytes
    ``offsets[i]:offsets[i] + sizes[i]`` of ``host_out`` or ``device_out``
    (whose memory ``keep_alive`` owns); errors name chunk ``i`` by
    ``keys[i]``. A future of ``event_loop``, resolved by the library's own
    task."""

def encode_stored(
    chain: StoredChain, inputs: Sequence[Buffer], event_loop: asyncio.AbstractEventLoop
) -> asyncio.Future[list[bytes]]:
    """Encodes chunks of ``chain`` (each in its stored order) in one batch on
    the CPU, each framed as stored; a future of ``event_loop``, resolved by
    the library's own task."""

@final
class ReaderArray:
    """A zarr array opened for reading."""

    @staticmethod
    def open(url: str, storage_options: dict[str, str] | None = None) -> ReaderArray:
        """Opens the array at ``url`` (a path, ``file://``, ``s3://``, ``http(s)://``)."""
    @staticmethod
    def open_async(
        event_loop: asyncio.AbstractEventLoop,
        url: str,
        storage_options: dict[str, str] | None = None,
    ) -> asyncio.Future[ReaderArray]:
        """`open` as a future of ``event_loop``, resolved by the library's own task."""
    @property
    def url(self) -> str:
        """The URL it was opened from."""
    @property
    def shape(self) -> list[int]:
        """The array's shape."""
    @property
    def data_type(self) -> str:
        """The zarr v3 name of the data type (also for v2 arrays)."""
    @property
    def typestr(self) -> str | None:
        """The NumPy type string of the elements, or None for data types NumPy lacks."""
    def metadata(self) -> dict[str, Any]:
        """The array's metadata (v2 ``.zarray`` or v3 ``zarr.json``)."""
    @property
    def batched_algorithm(self) -> str | None:
        """The algorithm that decodes the chunks in batches, or None for the zarrs pipeline."""
    @property
    def fallback_reason(self) -> str | None:
        """Why the chunks go through the zarrs pipeline, or None when they are batched."""
    @property
    def fill_value_bytes(self) -> bytes:
        """The fill value's element in native byte order."""
    def store_attributes(self, attributes_json: str) -> None:
        """Replaces the array's attributes in its store with a JSON object."""
    def resize(self, shape: list[int]) -> None:
        """Changes the array's shape, removing the chunks wholly outside it first."""
    def read_boxes(
        self,
        boxes: list[list[tuple[int, int]]],
        device: str | None = None,
        max_concurrent_requests: int | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
    ) -> HostBatch | CudaArray:
        """Reads ``boxes`` (``(start, stop)`` per axis each) in one read: every
        box's elements in C order, back to back."""
    def nbytes_stored(self) -> int:
        """The bytes of every object stored under the array."""
    def read(
        self,
        selection: Sequence[tuple[int, int, int]],
        device: str | None = None,
        max_concurrent_requests: int | None = None,
        wave_bytes: int | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
        progress: Callable[[int, int], object] | None = None,
        host_out: Buffer | None = None,
        device_out: tuple[int, int] | None = None,
    ) -> HostBatch | CudaArray | None:
        """Reads ``(start, stop, step)`` per axis: one host buffer, or a device
        array; or into ``host_out`` (writable, C-contiguous bytes) or
        ``device_out`` (``(address, length)`` of the read's GPU), returning None."""
    def read_async(
        self,
        event_loop: asyncio.AbstractEventLoop,
        selection: Sequence[tuple[int, int, int]],
        device: str | None = None,
        max_concurrent_requests: int | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
        host_out: Buffer | None = None,
        device_out: tuple[int, int] | None = None,
        keep_alive: object | None = None,
    ) -> asyncio.Future[HostBatch | CudaArray | None]:
        """`read` as a future of ``event_loop``, resolved by the library's own
        task, which holds ``host_out`` and ``keep_alive`` (the owner of
        ``device_out``) until it ends; cancelling the future stops the read."""

@final
class CudaArray:
    """A C-order array in GPU memory, kept alive by this object: the package's
    device result where CuPy is not (the reader and the codec without CuPy,
    the codec with ``device_outputs="views"``, `device_views`).
    Exposes ``__cuda_array_interface__`` (v3) and ``__dlpack__``, so CuPy,
    PyTorch, Numba and JAX take it without a copy. The work that wrote it has
    finished: neither interface names a stream to wait on."""

    @property
    def ptr(self) -> int:
        """Device address of the first byte."""
    @property
    def nbytes(self) -> int:
        """Bytes of the elements."""
    @property
    def device(self) -> int:
        """CUDA device ordinal."""
    @property
    def shape(self) -> list[int]:
        """The shape, C order."""
    @property
    def typestr(self) -> str:
        """The NumPy type string of the elements."""
    @property
    def __cuda_array_interface__(self) -> dict[str, object]:
        """Version 3 of the CUDA array interface."""
    def reshape(self, shape: Sequence[int]) -> CudaArray:
        """The same memory with another C-order shape of as many elements."""
    def __len__(self) -> int:
        """The length of the first axis."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCUDA, device)``."""
    def __dlpack__(
        self,
        *,
        stream: object = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        """A DLPack capsule of the array, which keeps it alive."""

# --- the writer (python/src/writer.rs) -------------------------------------

def write_chunks(
    url: str,
    storage_options: dict[str, str] | None,
    start: Sequence[int],
    shape: Sequence[int],
    host: Buffer | None = None,
    device_data: tuple[int, int] | None = None,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
) -> tuple[int, int, int]:
    """Writes the box at ``start`` of ``shape`` of the array at ``url`` from
    ``host`` (a contiguous buffer) or ``device_data`` (``(pointer, length)``
    of device memory); returns ``(chunks stored, fill-value chunks, bytes stored)``."""

def write_chunks_async(
    event_loop: asyncio.AbstractEventLoop,
    url: str,
    storage_options: dict[str, str] | None,
    start: Sequence[int],
    shape: Sequence[int],
    host: Buffer | None = None,
    device_data: tuple[int, int] | None = None,
    device: str | None = None,
    write_empty_chunks: bool = False,
    max_concurrent_requests: int | None = None,
    keep_alive: object | None = None,
) -> asyncio.Future[tuple[int, int, int]]:
    """`write_chunks` as a future of ``event_loop``, resolved by the library's
    own task, which holds ``host`` and ``keep_alive`` (the owner of
    ``device_data``) until the write ends; cancelling it stops the write."""

def create_array_metadata(
    url: str, spec: dict[str, Any], storage_options: dict[str, str] | None = None
) -> ReaderArray:
    """Writes the metadata of a new array at ``url`` and returns it opened:
    ``spec`` holds ``shape``, ``chunks``, ``shards``, ``data_type``,
    ``fill_value``, ``compressor`` and ``zarr_format``."""
