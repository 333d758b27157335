"""Type stubs of the Rust extension ``zarrs_nvcomp._zarrs_nvcomp``."""

from collections.abc import Buffer, Callable, Sequence

ALGORITHMS: list[str]
CPU_ALGORITHMS: list[str]

class DecodeError(RuntimeError):
    """A buffer of a batch cannot be decoded; the message names its index."""

class GpuUnavailableError(RuntimeError):
    """The CUDA backend was asked for and cannot be used; the message says why."""

class CudaError(RuntimeError):
    """A CUDA driver or nvCOMP call failed."""

def gpu_unavailable_reason(device: int = 0) -> str | None:
    """Why CUDA device ``device`` cannot be used, or None when it can."""

def set_nvcomp_library_path(path: str) -> None:
    """Names the nvCOMP library to try right after ``NVCOMP_LIBRARY``; raises
    RuntimeError once nvCOMP was looked for."""

def nvcomp_library_candidates() -> list[str]:
    """The files the loader tries for nvCOMP, in order."""

def nvcomp_library_path() -> str | None:
    """The file nvCOMP was opened from (opening it now if it was not yet; this
    needs no GPU), or None when it cannot be opened."""

def default_max_decoded_size() -> int:
    """The default limit on a buffer's decoded size for host outputs: the machine's memory."""

def normalize_config(config_json: str, stored: bool = False) -> str:
    """Parses ``{"algorithm": ..., "options": {...}}``; returns it with every option written out.

    ``stored``: the configuration comes from metadata, which kvikio may have
    written, so options left out take kvikio's defaults (bare GDeflate).
    """

def has_cpu_implementation(config_json: str) -> bool: ...
def check_disjoint(inputs: Sequence[tuple[int, int]], outputs: Sequence[tuple[int, int]]) -> None:
    """Raises ValueError when an output ``(address, length)`` overlaps another buffer."""

class HostBatch(Buffer):
    """Host buffers in one allocation (writable buffer protocol, ``uint8``)."""

    @property
    def offsets(self) -> list[int]: ...
    def __len__(self) -> int: ...
    def to_bytes_list(self) -> list[bytes]: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class DeviceBatch:
    """Device buffers in one device allocation, freed with this object."""

    @property
    def ptr(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def ranges(self) -> list[tuple[int, int]]: ...
    @property
    def nbytes(self) -> int: ...
    def __len__(self) -> int: ...

class Engine:
    """One batch codec of the engine on one backend."""

    def __init__(
        self,
        config_json: str,
        device: str | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
    ) -> None: ...
    @property
    def backend(self) -> str: ...
    @property
    def max_decoded_size(self) -> int: ...
    @property
    def max_device_decoded_size(self) -> int: ...
    @property
    def device_ordinal(self) -> int | None: ...
    def config_json(self) -> str: ...
    def encode(self, inputs: Sequence[Buffer]) -> HostBatch: ...
    def decode(self, inputs: Sequence[Buffer]) -> HostBatch: ...
    def decode_into(self, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> None: ...
    def encode_device(self, inputs: Sequence[tuple[int, int]]) -> DeviceBatch: ...
    def decode_device(self, inputs: Sequence[tuple[int, int]]) -> DeviceBatch: ...
    def decode_device_into(
        self, inputs: Sequence[tuple[int, int]], outputs: Sequence[tuple[int, int]]
    ) -> None: ...

class StoreError(OSError): ...

class ReaderArray:
    @staticmethod
    def open(url: str, storage_options: dict[str, str] | None = None) -> ReaderArray: ...
    @property
    def url(self) -> str: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def data_type(self) -> str: ...
    @property
    def typestr(self) -> str | None: ...
    def metadata_json(self) -> str: ...
    @property
    def batched_algorithm(self) -> str | None: ...
    @property
    def fallback_reason(self) -> str | None: ...
    def read(
        self,
        selection: Sequence[tuple[int, int, int]],
        device: str | None = None,
        max_concurrent_requests: int | None = None,
        wave_bytes: int | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
        progress: Callable[[int, int], object] | None = None,
    ) -> HostBatch | CudaArray: ...

class CudaArray:
    @property
    def ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def typestr(self) -> str: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, object]: ...
    def reshape(self, shape: Sequence[int]) -> CudaArray: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: object = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object: ...

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
) -> tuple[int, int, int]: ...
def create_array_metadata(
    url: str, new_json: str, storage_options: dict[str, str] | None = None
) -> None: ...
