"""Caffe's shape rules as the frontend implements them."""

from __future__ import annotations

import pytest

from tpuc.frontends.caffe.layers_nn import caffe_pool_size
from tpuc.frontends.caffe.layers_shape import reshape_shape


@pytest.mark.parametrize(
    ("size", "k", "s", "p", "ceil", "want"),
    [
        (8, 3, 2, 0, True, 4),  # ceil((8-3)/2)+1
        (8, 3, 2, 0, False, 3),
        (8, 3, 2, 1, True, 5),
        (7, 2, 2, 1, True, 4),  # ceil gives 5; its window would start in the padding
        (112, 3, 2, 0, True, 56),  # ResNet's pool1 in Caffe (PyTorch floor gives 55)
        (224, 7, 1, 0, True, 218),
    ],
)
def test_pool_size(size, k, s, p, ceil, want):
    assert caffe_pool_size(size, k, s, p, ceil) == want


@pytest.mark.parametrize(
    ("shape", "dims", "axis", "num_axes", "want"),
    [
        ([2, 8], [0, 2, -1], 0, -1, [2, 2, 4]),
        ([2, 8], [2, 4], 1, -1, [2, 2, 4]),
        ([2, 8], [2, 4], -2, -1, [2, 2, 4]),  # -2: replace from the last axis on
        ([2, 8], [1], 0, 0, [1, 2, 8]),
        ([2, 8], [1], 1, 0, [2, 1, 8]),
        ([2, 3, 4], [-1], 1, -1, [2, 12]),
    ],
)
def test_reshape_shape(shape, dims, axis, num_axes, want):
    assert reshape_shape(shape, dims, axis, num_axes) == want


def test_reshape_errors():
    assert "more than one -1" in reshape_shape([2, 8], [-1, -1], 0, -1)
    assert "does not hold" in reshape_shape([2, 8], [3, 5], 0, -1)
