"""``oindex``, ``vindex``, integer arrays and boolean masks on
``zarrs_nvcomp.Array``: the elements zarr-python's (and NumPy's) selections
give, each selection read in one read of the chunks it touches."""

from __future__ import annotations

import numpy as np
import pytest

import zarrs_nvcomp

zarr = pytest.importorskip("zarr")

DATA = np.arange(37 * 23, dtype="int32").reshape(37, 23)


@pytest.fixture(params=["plain", "sharded", "v2"])
def arrays(request, tmp_path):
    """The same data in zarrs_nvcomp's and zarr's hands."""
    path = str(tmp_path / "a.zarr")
    kwargs = {
        "plain": {"chunks": (5, 4)},
        "sharded": {"chunks": (5, 4), "shards": (10, 8)},
        "v2": {"chunks": (5, 4), "zarr_format": 2},
    }[request.param]
    z = zarr.create_array(path, shape=DATA.shape, dtype=DATA.dtype, fill_value=-1, **kwargs)
    z[:30] = DATA[:30]  # the last rows' chunks are missing: the fill value
    expected = np.full_like(DATA, -1)
    expected[:30] = DATA[:30]
    return zarrs_nvcomp.open_array(path), zarr.open_array(path), expected


class CountingReads:
    """An array's reader, counting the calls that read."""

    def __init__(self, inner) -> None:
        self.inner, self.reads = inner, 0

    def __getattr__(self, name):
        attribute = getattr(self.inner, name)
        if name in ("read", "read_boxes"):
            self.reads += 1
        return attribute


def count_reads(array) -> CountingReads:
    counting = CountingReads(array._inner)
    array._inner = counting
    return counting


RNG = np.random.default_rng(3)
ORTHOGONAL = [
    ([0, 5, 36], slice(None)),
    (np.array([36, 0, 0, 17]), [22, 1]),
    (slice(3, 30, 4), np.array([-1, 3, 3])),
    (RNG.random(37) < 0.3, slice(None)),
    (RNG.random(37) < 0.5, RNG.random(23) < 0.5),
    (7, [2, 9, 4]),
    (np.array([], dtype=int), slice(None)),
]


@pytest.mark.parametrize("selection", ORTHOGONAL, ids=range(len(ORTHOGONAL)))
def test_oindex_is_zarrs_and_one_read(arrays, selection):
    ours, theirs, expected = arrays
    reads = count_reads(ours)
    got = ours.oindex[selection]
    np.testing.assert_array_equal(got, theirs.oindex[selection])
    np.testing.assert_array_equal(
        got,
        expected[np.ix_(*_ix(selection, expected.shape))].squeeze(
            axis=tuple(i for i, s in enumerate(selection) if isinstance(s, int))
        ),
    )
    assert reads.reads <= 1


def _ix(selection, shape):
    out = []
    for s, n in zip(selection, shape, strict=True):
        if isinstance(s, slice):
            out.append(np.arange(n)[s])
        elif isinstance(s, int):
            out.append([s])
        else:
            s = np.asarray(s)
            out.append(np.flatnonzero(s) if s.dtype == bool else s.astype(int))
    return out


VECTORIZED = [
    (np.array([0, 36, 5, 5]), np.array([0, 22, 3, 3])),
    (np.array([[1, 2], [30, 31]]), np.array([[4, 5], [6, 7]])),
    (np.array([3, 8, 12]), np.array(2)),
]


@pytest.mark.parametrize("selection", VECTORIZED, ids=range(len(VECTORIZED)))
def test_vindex_is_zarrs_and_one_read(arrays, selection):
    ours, theirs, expected = arrays
    reads = count_reads(ours)
    got = ours.vindex[selection]
    np.testing.assert_array_equal(got, theirs.vindex[selection])
    np.testing.assert_array_equal(got, expected[selection])
    assert reads.reads == 1


def test_masks_and_index_arrays_in_getitem_read_as_zarrs(arrays):
    ours, theirs, expected = arrays
    mask = RNG.random(expected.shape) < 0.2
    for selection in [mask, [4, 0, 31], (slice(2, 9), [3, 20]), ([1, 2], [3, 4])]:
        reads = count_reads(ours)
        got = ours[selection]
        np.testing.assert_array_equal(got, theirs[selection])
        np.testing.assert_array_equal(got, expected[selection])
        assert reads.reads == 1
        ours._inner = reads.inner
    np.testing.assert_array_equal(ours.vindex[mask], expected[mask])


def test_bad_index_arrays_are_selection_errors(arrays):
    ours, _, _ = arrays
    for bad in [([37],), ([0], [23]), (np.array([[1]]), slice(None)), (np.ones(5, bool),)]:
        with pytest.raises(zarrs_nvcomp.SelectionError):
            ours.oindex[bad]
    with pytest.raises(zarrs_nvcomp.SelectionError, match="broadcast"):
        ours.vindex[np.array([1, 2]), np.array([1, 2, 3])]
    with pytest.raises(IndexError):
        ours.vindex[np.ones((3, 3), bool)]


@pytest.mark.gpu
def test_fancy_reads_on_the_gpu_are_one_read_each_into_cupy(arrays):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    ours, _, expected = arrays
    mask = RNG.random(expected.shape) < 0.2
    cases = [
        (lambda: ours.oindex[[0, 36, 5], 3:20], expected[np.ix_([0, 36, 5], range(3, 20))]),
        (lambda: ours.vindex[np.array([1, 30]), np.array([2, 22])], expected[[1, 30], [2, 22]]),
        (lambda: ours[mask], expected[mask]),
        (lambda: ours.oindex[cp.asarray([4, 4, 0]), :], expected[[4, 4, 0]]),
    ]
    for read, want in cases:
        reads = count_reads(ours)
        got = read()
        assert isinstance(got, cp.ndarray), type(got)
        np.testing.assert_array_equal(cp.asnumpy(got), want)
        assert reads.reads == 1
        ours._inner = reads.inner
