"""The chunk-parallel reader: reads a selection of a zarr array (v2 or v3) from
a local directory or an object store, fetching its chunks concurrently and
decoding them in batches on the GPU (nvCOMP) or on the CPU.

>>> import zarrs_nvcomp
>>> a = zarrs_nvcomp.open_array("s3://bucket/data.zarr", storage_options={"region": "eu-west-1"})
>>> a.shape, a.dtype, a.chunks
>>> block = a[100:200, ::2]                        # GPU (CuPy) when usable, else NumPy
>>> host = zarrs_nvcomp.read_chunks_parallel("/data/a.zarr", (0, ...), device="cpu")

``progress=True`` shows a progress bar over the bytes read (tqdm when
installed) for reads that take more than a second; ``progress=callable``
calls ``callable(done_bytes, total_bytes)`` on the reading thread as the read
advances. An `Array` pickles as its URL and storage options (which
may hold credentials) and opens the array again when unpickled, so Dask's
processes and distributed schedulers can read from it::

    dask.array.from_array(zarrs_nvcomp.open_array(url), chunks=...)

``storage_options`` are object_store configuration keys (for S3 ``endpoint``,
``region``, ``access_key_id``, ``secret_access_key``, ``session_token``,
``allow_http``, ...; the ``AWS_*`` environment variables are read too), plus
``timeout``, ``connect_timeout``, ``max_retries`` and ``retry_timeout``, which
bound a request and also the whole open, and ``max_metadata_size``, the most
bytes a metadata document may have (64 MiB). Plain ``http://`` endpoints need
``allow_http``. The fsspec/s3fs spellings (``anon``, ``key``, ``secret``,
``token``, ``endpoint_url``, ``client_kwargs``) are translated to these
keys. ``store`` may also be a zarr store, an obstore store or a
``zarr.Array``. Object keys are the URL's text as written: ``s3://b/a%20b.zarr``
is the prefix ``a%20b.zarr`` (as in fsspec), and ``file://`` paths are not
percent-decoded either. Ctrl-C (``KeyboardInterrupt``) cancels a read or an open.

Selections are NumPy basic indexing: integers (an integer drops its axis),
slices with any step, and one ``...``. Only the chunks that hold selected
elements are read, and only the selection's elements are allocated (a
negative step reads the ascending selection and flips it, with CuPy on the
GPU). A selection larger than the machine's memory (the GPU's for device
results) raises `MemoryError` naming its size.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Unpack

import numpy as np

from zarrs_nvcomp._args import checked_bool, checked_int
from zarrs_nvcomp._array_meta import ArrayInfo, Attributes, array_info, attributes_json
from zarrs_nvcomp._cpu_path import CpuPathWarning, warn_cpu_path
from zarrs_nvcomp._create_args import shape_arg
from zarrs_nvcomp._fancy import (
    OrthogonalIndexer,
    VectorizedIndexer,
    getitem_plan,
    is_fancy,
    read_plan,
)
from zarrs_nvcomp._local_paths import check_array_path
from zarrs_nvcomp._progress import ProgressCallback, run_with_progress
from zarrs_nvcomp._read_async import read_async
from zarrs_nvcomp._read_call import read_call
from zarrs_nvcomp._read_out import empty_result
from zarrs_nvcomp._stores import location
from zarrs_nvcomp._write import write_into, write_into_async
from zarrs_nvcomp._zarrs_nvcomp import (
    CudaArray,
    InvalidArgumentError,
    ReaderArray,
    StoreError,
    UnsupportedTypeError,
)
from zarrs_nvcomp.types import ReadOptions, StorageOptions

__all__ = [
    "Array",
    "CpuPathWarning",
    "CudaArray",
    "StoreError",
    "open_array",
    "read_chunks_parallel",
]


class Array:
    """A zarr array opened by `open_array`; ``a[selection]`` reads with
    ``device=None``, `read` takes a device. Pickles as its URL and
    storage options, and opens the array again when unpickled."""

    __slots__ = ("_inner", "_metadata", "_read_only", "_storage_options")

    def __init__(
        self,
        inner: ReaderArray,
        storage_options: dict[str, str] | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self._inner = inner
        self._storage_options = dict(storage_options or {})
        self._metadata: dict[str, Any] = inner.metadata()
        self._read_only = read_only

    def __reduce__(self) -> tuple[Any, ...]:
        mode = "r" if self._read_only else "r+"
        return (_reopen, (self.url, self._storage_options, mode))

    @property
    def read_only(self) -> bool:
        """Whether the array was opened with ``mode="r"``: writes are refused."""
        return self._read_only

    @property
    def url(self) -> str:
        """The URL or path the array was opened from."""
        return self._inner.url

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return tuple(self._inner.shape)

    @shape.setter
    def shape(self, new_shape: int | tuple[int, ...]) -> None:
        """Assigning the shape resizes the array (`resize`), as in zarr."""
        self.resize(new_shape)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._inner.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements (native byte order: reads return
        native data whatever the stored order);
        [`UnsupportedTypeError`][zarrs_nvcomp.UnsupportedTypeError] for a data
        type NumPy has no dtype for."""
        typestr = self._inner.typestr
        if typestr is None:
            raise UnsupportedTypeError(f"data type {self._inner.data_type} has no NumPy dtype")
        return np.dtype(typestr)

    @property
    def nbytes(self) -> int:
        """The bytes of the whole array decoded (`size * dtype.itemsize`); see
        `nbytes_stored` for the bytes in the store."""
        return self.size * self.dtype.itemsize

    @property
    def zarr_format(self) -> int:
        """2 or 3: the zarr format of the array's metadata."""
        return int(self._metadata["zarr_format"])

    @property
    def metadata(self) -> dict[str, Any]:
        """The array's metadata (``.zarray`` or ``zarr.json``) as a dict."""
        return copy.deepcopy(self._metadata)

    @property
    def chunks(self) -> tuple[int, ...]:
        """The shape of the stored chunks (of the shards for sharded arrays)."""
        if self.zarr_format == 2:
            return tuple(self._metadata["chunks"])
        grid = self._metadata["chunk_grid"]
        return tuple(grid["configuration"]["chunk_shape"])

    @property
    def codecs(self) -> list[dict[str, Any]]:
        """The codec chain as metadata dicts: v3 ``codecs``; v2 ``filters`` then
        ``compressor``."""
        if self.zarr_format == 2:
            chain = list(self._metadata.get("filters") or [])
            if self._metadata.get("compressor") is not None:
                chain.append(self._metadata["compressor"])
            return chain
        return list(self._metadata["codecs"])

    @property
    def fill_value(self) -> Any:
        """The fill value, a NumPy scalar of `dtype`: what missing chunks
        read as, and what chunks equal to it are not stored for."""
        return np.frombuffer(self._inner.fill_value_bytes, dtype=self.dtype)[0]

    @property
    def attrs(self) -> Attributes:
        """The user attributes, a mutable mapping of JSON values; each change
        is stored at once, as zarr's `attrs` (refused where the array was
        opened with `mode="r"`)."""
        return Attributes(self)

    @property
    def info(self) -> ArrayInfo:
        """A summary of the array, printed as a table (zarr's `info`)."""
        return array_info(self)

    def nbytes_stored(self) -> int:
        """The bytes stored for the array (its metadata and its chunks), as
        zarr's `nbytes_stored()`: the store's objects under it are listed."""
        return int(self._inner.nbytes_stored())

    def resize(self, new_shape: int | tuple[int, ...]) -> None:
        """Changes the array's shape, as zarr's `resize`: the chunks wholly
        outside the new shape are removed from the store first, then the
        new shape is stored (one put of the metadata document). Elements
        that come into the shape read as the fill value where their chunk
        was not stored. Refused where the array was opened with `mode="r"`."""
        self._writable("resized")
        sides = shape_arg("new_shape", new_shape, minimum=0)
        if len(sides) != self.ndim:
            raise InvalidArgumentError(
                f"new_shape {tuple(sides)} has {len(sides)} dimensions, the array {self.ndim}"
            )
        self._inner.resize(sides)
        self._reload()

    def _store_attributes(self, attributes: dict[str, Any]) -> None:
        """Stores ``attributes`` as the array's, then reads its metadata again."""
        self._writable("written")
        self._inner.store_attributes(attributes_json(attributes))
        self._reload()

    def _writable(self, what: str) -> None:
        if self._read_only:
            raise InvalidArgumentError(f"{self.url} was opened with mode='r': it cannot be {what}")

    def _reload(self) -> None:
        """Opens the array again: its metadata as now stored."""
        self._inner = ReaderArray.open(self.url, self._storage_options)
        self._metadata = self._inner.metadata()

    @property
    def batched_algorithm(self) -> str | None:
        """The algorithm that decodes the chunks in batches (``"blosc-lz4"`` and
        the like for blosc chunks, whose streams are decoded in batches), or
        None when they go through the zarrs pipeline (`fallback_reason`
        says why)."""
        return self._inner.batched_algorithm

    @property
    def fallback_reason(self) -> str | None:
        """Why the chunks go through the zarrs pipeline (one chunk at a time),
        or None when they are decoded in batches (`batched_algorithm`)."""
        return self._inner.fallback_reason

    def read(
        self,
        selection: Any = (),
        *,
        device: str | None = None,
        max_concurrent_requests: int | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
        progress: bool | ProgressCallback | None = None,
        out: Any = None,
    ) -> Any:
        """Reads ``selection``: a NumPy array (``device="cpu"``) or a GPU array
        (``"cuda"``/``"cuda:N"``: CuPy when installed, else `CudaArray`);
        ``None`` means the GPU when it is usable, CuPy is installed and CuPy
        has the data type (numbers and bool).

        ``trusted_input=True`` declares every chunk valid: the GPU then decodes
        in this process, where a corrupt chunk can hang it or end its CUDA
        context; by default a worker process decodes on the GPU (see the
        README's "Corrupt input").

        ``max_decoded_size``: the largest decoded size of one chunk, in bytes
        (default: the machine's memory for host reads, the GPU's for device
        reads); larger chunks are a `zarrs_nvcomp.DecodeError`.

        The process's first read that runs on the CPU where the GPU was asked
        for or expected gives a `CpuPathWarning` saying why.

        ``progress``: ``True`` shows a progress bar (tqdm when installed) when
        the read takes more than a second; a callable is called as
        ``progress(done_bytes, total_bytes)`` on this thread as the read
        advances, the last time with ``done_bytes == total_bytes`` (the bytes
        of the selection); an exception it raises stops the
        read.

        ``out``: where to put the result instead of new memory, returned: a
        NumPy array (read on the CPU) or a device array exposing
        ``__cuda_array_interface__`` such as CuPy's (read on its GPU), of
        exactly the selection's shape and the array's dtype, C-contiguous and
        writable; ``device`` may be left out or must agree. The chunks are
        decoded straight into it, and every element is written (missing
        chunks as the fill value). Anything else raises `ValueError`
        naming what is wrong, before anything is read. Work pending on the
        stream that produced a device ``out`` is waited for first, and the
        writes are done when the call returns. The read runs without the GIL:
        as with NumPy's own ``out=``, do not free, resize or use ``out`` from
        another thread meanwhile; after an error it may hold part of the
        result."""
        call = read_call(
            self, selection, device=device, max_concurrent_requests=max_concurrent_requests,
            trusted_input=trusted_input, max_decoded_size=max_decoded_size, out=out,
        )  # fmt: skip
        if call.empty:
            run_with_progress(progress, self.url, lambda report: report and report(0, 0))
            return empty_result(call.out_shape, call.dtype, call.device) if out is None else out
        if call.lent is not None and call.flips:
            # The reader writes ascending selections: flip a copy into out.
            out[...] = self.read(selection, **call.options(), progress=progress)
            return out
        data = run_with_progress(
            progress,
            self.url,
            lambda report: self._inner.read(
                call.strided,
                call.device,
                call.max_concurrent_requests,
                trusted_input=call.trusted_input,
                max_decoded_size=call.max_decoded_size,
                progress=report,
                **({} if call.lent is None else call.lent.arguments()),
            ),
        )
        warn_cpu_path(self.url, call.requested, call.device, self.fallback_reason)
        return out if call.lent is not None else call.result(data)

    async def read_async(
        self,
        selection: Any = (),
        *,
        device: str | None = None,
        max_concurrent_requests: int | None = None,
        trusted_input: bool = False,
        max_decoded_size: int | None = None,
        out: Any = None,
    ) -> Any:
        """`read` as an awaitable (but ``progress``): no thread waits for
        it; cancelling the awaiting task stops the read."""
        options = (device, max_concurrent_requests, trusted_input, max_decoded_size, out)
        return await read_async(self, selection, *options)

    async def write_async(
        self,
        data: Any,
        selection: Any = (),
        *,
        device: str | None = None,
        write_empty_chunks: bool = False,
        max_concurrent_requests: int | None = None,
    ) -> tuple[int, int]:
        """`zarrs_nvcomp.write_chunks_parallel_async` into this array: a
        cancelled write leaves each chunk the old one or the new one."""
        return await write_into_async(
            self, data, selection, device=device,
            write_empty_chunks=checked_bool("write_empty_chunks", write_empty_chunks),
            max_concurrent_requests=checked_int("max_concurrent_requests", max_concurrent_requests),
        )  # fmt: skip

    @property
    def oindex(self) -> OrthogonalIndexer:
        """Orthogonal selection, as zarr's: `a.oindex[[0, 5], 10:20]`; per
        axis an integer, a slice, an integer array or a boolean mask, read in
        one read of the chunks it touches."""
        return OrthogonalIndexer(self)

    @property
    def vindex(self) -> VectorizedIndexer:
        """Coordinate and mask selection, as zarr's: `a.vindex[rows, cols]`
        (integer arrays broadcast together) or `a.vindex[mask]`, read in one
        read of the chunks it touches."""
        return VectorizedIndexer(self)

    def __getitem__(self, selection: Any) -> Any:
        """``read(selection)``; integer indexes of every axis give a NumPy
        scalar, as NumPy's do (GPU reads a 0-d array, as CuPy's do). Integer
        arrays and boolean masks read as zarr's `__getitem__` reads them:
        index arrays alone, or one mask of the array's shape, as
        coordinates (`vindex`); with slices, or one index array, as
        `oindex`."""
        if is_fancy(selection):
            return read_plan(self, getitem_plan(self, selection), None)
        result = self.read(selection)
        if isinstance(result, np.ndarray) and result.ndim == 0 and selection is not Ellipsis:
            return result[()]
        return result

    def __setitem__(self, selection: Any, value: Any) -> None:
        """Writes ``value`` (NumPy or GPU data) into ``selection``; see
        `zarrs_nvcomp.write_chunks_parallel`."""
        write_into(self, value, selection)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self.read(..., device="cpu")
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def __len__(self) -> int:
        if not self.shape:
            raise UnsupportedTypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<zarrs_nvcomp.Array {self.url!r} shape={self.shape} dtype={self._inner.data_type}>"


#: open_array's modes, as zarr's: "r" reads only; "r+" and "a" (an existing
#: array: creating one needs create_array) read and write.
_MODES = ("r", "r+", "a")


def open_array(
    store: Any, storage_options: StorageOptions | None = None, *, mode: str = "r+"
) -> Array:
    """Opens the zarr array (v2 or v3) at ``store``: a local path, ``file://``,
    ``s3://bucket/prefix`` or ``http(s)://`` URL; a zarr store
    (``zarr.storage.LocalStore``, ``FsspecStore`` over S3 or local files,
    ``ObjectStore``); an obstore ``S3Store``, ``LocalStore`` or ``HTTPStore``;
    or a ``zarr.Array`` (read from its store and path).

    ``storage_options`` (with a URL only: stores carry their own) are
    object_store's keys or the fsspec/s3fs spellings (``anon``, ``key``,
    ``secret``, ``token``, ``endpoint_url``, ``client_kwargs={"endpoint_url":
    ..., "region_name": ...}``), translated.

    A local path may start with ``~``. Raises `StoreError` (an
    `OSError`; a `FileNotFoundError` too for a local path that
    does not exist; naming its arrays for a group) when the store cannot be
    read or holds no array there, `ValueError` for an invalid URL or
    options (naming an unknown key), `TypeError` for a store the reader
    cannot open (an in-memory store).

    ``mode`` is zarr's: ``"r"`` opens it read-only (a write is an
    `InvalidArgumentError`), ``"r+"`` (the default) and ``"a"`` for
    reading and writing. zarr's creating modes (``"w"``, ``"w-"``) are
    `zarrs_nvcomp.create_array`'s job: an `InvalidArgumentError`
    here, as is any other mode."""
    if mode not in _MODES:
        hint = "; create arrays with zarrs_nvcomp.create_array" if mode in ("w", "w-") else ""
        raise InvalidArgumentError(f"mode {mode!r}: open_array takes {', '.join(_MODES)}{hint}")
    if isinstance(store, Array):
        if storage_options:
            raise InvalidArgumentError("storage_options apply to a URL, not to an opened array")
        if mode == "r" and not store.read_only:
            return Array(store._inner, store._storage_options, read_only=True)
        return store
    url, options = location(store, storage_options)
    check_array_path(url)
    return Array(ReaderArray.open(url, options), options, read_only=mode == "r")


def _reopen(url: str, storage_options: dict[str, str], mode: str) -> Array:
    """An unpickled `Array`: opened again, in the mode it was."""
    return open_array(url, storage_options, mode=mode)


def read_chunks_parallel(
    store: Any,
    selection: Any = (),
    *,
    storage_options: StorageOptions | None = None,
    **read_options: Unpack[ReadOptions],
) -> Any:
    """Reads ``selection`` (NumPy basic indexing; the whole array by default) of
    the zarr array at ``store`` (a URL, a store or an array, as for
    `open_array`), fetching its chunks concurrently and decoding
    them in batches. The other keyword arguments are those of
    `Array.read` (``device``, ``max_concurrent_requests``,
    ``trusted_input``, ``max_decoded_size``, ``progress``, ``out``).

    ``device``: ``None`` (the GPU when usable and CuPy installed, else the
    CPU), ``"cpu"`` (a NumPy array), ``"cuda"``/``"cuda:N"`` (a CuPy array, or
    a `CudaArray` without CuPy). Errors: `IndexError` for bad
    selections, `StoreError`/`ValueError` for stores,
    `zarrs_nvcomp.DecodeError` naming the chunk's key for bad chunks,
    `zarrs_nvcomp.GpuUnavailableError` when ``"cuda"`` cannot be used.
    ``max_decoded_size``: the largest decoded size of one chunk in bytes
    (default: what the destination memory holds); larger chunks are a
    ``DecodeError`` that names this option.
    ``progress``, ``out`` (an array to read into, returned): see
    `Array.read`.
    """
    return open_array(store, storage_options).read(selection, **read_options)
