"""Shared by the benchmarks: a `BatchArray` for nvCOMP's own Python API."""


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
