#!/usr/bin/env bash
# Runs zarr-python's own tests of codecs, indexing, arrays, the v2 format and
# its API with zarrs_nvcomp.NvcompCodecPipeline as zarr's codec pipeline (set
# through zarr's ZARR_CODEC_PIPELINE__PATH). zarr's wheel has no tests: they
# come from the source distribution of the installed zarr, downloaded once
# into target/zarr-tests. $1: the Python of the environment (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${1:-.venv/bin/python}
# Absolute, the venv's link kept (resolving it would leave the venv).
py=$(cd "$(dirname "$py")" && pwd)/$(basename "$py")
version=$("$py" -c 'import zarr; print(zarr.__version__)')
tests=$PWD/target/zarr-tests/zarr-$version
if [[ ! -d $tests/tests ]]; then
  download=$(mktemp -d)
  "$py" -m pip download -q --no-deps --no-binary=:all: "zarr==$version" -d "$download"
  mkdir -p "$tests"
  tar xzf "$download/zarr-$version.tar.gz" -C "$tests" --strip-components=1
  # The tests import the installed zarr, not the sources beside them.
  rm -rf "$tests/src" "$download"
fi
cd "$tests"
# -W ignore: zarr's configuration turns warnings into errors; its tests of
# warnings catch them with pytest.warns all the same.
ZARR_CODEC_PIPELINE__PATH=zarrs_nvcomp.NvcompCodecPipeline "$py" -m pytest -q -p no:cacheprovider \
  -W ignore tests/test_codecs tests/test_indexing.py tests/test_array.py \
  tests/test_v2.py tests/test_api.py
# zarr's own selection tests (oindex, vindex, masks) on zarrs_nvcomp.Array.
ZARR_TESTS=$tests/tests "$py" -m pytest -q -p no:cacheprovider -W ignore "$root/python/tests_zarr_own"
