"""zarr 2 tests: run in the zarr 2.18 / numcodecs < 0.16 environment (scripts/zarr2-tests.sh)."""

import pytest

zarr = pytest.importorskip("zarr")
if int(zarr.__version__.split(".")[0]) != 2:
    pytest.skip(f"these tests need zarr 2, found {zarr.__version__}", allow_module_level=True)
