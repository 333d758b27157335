"""Shared by the benchmarks: nvCOMP's own Python API, its names of the
algorithms and a `BatchArray` of device arrays."""

#: nvidia.nvcomp's names of the algorithms the benchmarks compare, by ours.
NVCOMP_NAMES = {
    "lz4": "LZ4",
    "zstd": "Zstd",
    "gdeflate": "GDeflate",
    "snappy": "Snappy",
    "ans": "ANS",
}


def as_batch(nvcomp, sources):
    """A `BatchArray` of device arrays, through whichever constructor this
    version of `nvidia.nvcomp` has. Every source must be 16-byte aligned."""
    for make in (
        getattr(nvcomp, "as_arrays", None),
        getattr(nvcomp, "BatchArray", None),
    ):
        if make is None:
            continue
        try:
            batch = make(sources)
        except TypeError:
            continue
        if type(batch).__name__ == "BatchArray":
            return batch
    raise RuntimeError(
        f"no way to build a BatchArray in this nvidia.nvcomp: {dir(nvcomp)}"
    )
