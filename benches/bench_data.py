"""Data shared by the Python benchmarks."""

import numpy as np


def field_f32(nbytes: int, seed: int = 0) -> np.ndarray:
    """About ``nbytes`` of a float32 2-D random walk rounded to 0.01 (seeded):
    compressible like a geoscience field."""
    cols = 4096
    rows = max(1, nbytes // (4 * cols))
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((rows, cols), dtype=np.float32)
    steps *= np.float32(0.1)
    field = np.cumsum(steps, axis=1, dtype=np.float32)
    field += np.cumsum(rng.standard_normal(rows, dtype=np.float32))[:, None]
    return np.round(field, 2)
