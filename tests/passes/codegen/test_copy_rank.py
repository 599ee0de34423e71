"""A strided copy of more axes than a tensor record holds becomes copies
of at most MAX_RANK axes (`_fit_rank`) that move exactly the elements the
one copy would."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from tpuc.passes.codegen.commands import _fit_rank
from tpuc.target.isa.records import MAX_RANK, contiguous_strides


def _tile_view(dims, reps):
    """np.tile's (…, r, d, …) copy shape and source strides (elements)."""
    strides = contiguous_strides(tuple(dims))
    shape, source = [], []
    for d, r, st in zip(dims, reps, strides, strict=True):
        shape += [r, d]
        source += [0, st]
    return shape, source


@pytest.mark.parametrize(
    "dims, reps",
    [
        ((2, 1, 2, 1, 2), (2, 2, 2, 2, 2)),  # size-1 axes dropped: 8 axes, one copy
        ((2, 2, 2, 2, 3), (2, 3, 2, 2, 2)),  # 10 axes: one copy per leading index
        ((1, 1), (1, 1)),  # nothing but size-1 axes
    ],
)
def test_fit_rank_moves_what_one_copy_moves(dims, reps):
    x = np.arange(int(np.prod(dims)), dtype=np.int32).reshape(dims)
    shape, source = _tile_view(dims, reps)
    expected = np.tile(x, reps).reshape(-1)
    out = np.full(expected.size, -1, np.int32)
    copies = _fit_rank(shape, source, contiguous_strides(tuple(shape)))
    item = x.itemsize
    for part, s, s_off, d, d_off in copies:
        assert len(part) <= MAX_RANK
        src = as_strided(x.reshape(-1)[s_off:], part, [v * item for v in s])
        as_strided(out[d_off:], part, [v * item for v in d])[...] = src
    np.testing.assert_array_equal(out, expected)
    assert len(copies) == (4 if len(shape) - shape.count(1) > MAX_RANK else 1)
