"""Data-movement kernels on records against numpy references (no IR)."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.kernels import data
from tpuc.kernels.element import quantized
from tpuc.kernels.requant import Relu

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 8, 4, 6)).astype(np.float32)


def test_concat_and_fused_relu():
    a, b = X[:, :3], X[:, 3:]
    out = data.concat(data.Concat(1), a, b)
    np.testing.assert_array_equal(out, X)
    capped = data.concat(data.Concat(-3, Relu(True, 0.5)), a, b)
    np.testing.assert_array_equal(capped, np.clip(X, 0, 0.5))


def test_split_sizes_and_equal_pieces():
    parts = data.split(data.Split(1, (3, 5), 2), X)
    assert [p.shape[1] for p in parts] == [3, 5]
    assert [p.shape[1] for p in data.split(data.Split(1, (), 3), X)] == [3, 3, 2]
    with pytest.raises(ValueError, match="do not cover"):
        data.split(data.Split(1, (3, 4), 2), X)


def test_slice_clamps_as_onnx():
    p = data.Slice((0, -1, 0, 5), (2, -100, 4, 10**9), (1, -1, 2, 1))
    np.testing.assert_array_equal(data.slice_(p, X), X[:, ::-1, 0:4:2, 5:])
    assert data.slice_(data.Slice(), X) is not None


def test_shape_moves():
    assert data.reshape(data.Reshape((0, -1)), X).shape == (2, 192)
    assert data.flatten(data.Flatten(1, -1), X).shape == (2, 192)
    y = X[:, :1]
    assert data.squeeze(data.Squeeze((1,)), y).shape == (2, 4, 6)
    assert data.squeeze(data.Squeeze(), X[:1, :1]).shape == (4, 6)
    assert data.unsqueeze(data.Unsqueeze((0, -1)), X).shape == (1, 2, 8, 4, 6, 1)
    np.testing.assert_array_equal(
        data.permute(data.Permute((0, 2, 3, 1)), X), X.transpose(0, 2, 3, 1)
    )


@pytest.mark.parametrize("crd", [False, True])
def test_depth_to_space_inverts_space_to_depth(crd):
    d2s = data.depth_to_space(data.Depth2Space(2, 2, crd), X)
    assert d2s.shape == (2, 2, 8, 12)
    back = data.depth_to_space(data.Depth2Space(2, 2, crd, inversed=True), d2s)
    np.testing.assert_array_equal(back, X)


def test_pad_modes_and_crop():
    p = data.Pad((0, 0, 1, -1, 0, 0, 2, -2), "constant", 3.0)
    ref = np.pad(X[:, :, :, 1:4], [(0, 0), (0, 0), (1, 2), (0, 0)], constant_values=3.0)
    np.testing.assert_array_equal(data.pad(p, X), ref)
    r = data.pad(data.Pad((0, 0, 1, 1, 0, 0, 1, 1), "reflect"), X)
    np.testing.assert_array_equal(r, np.pad(X, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="reflect"))
    with pytest.raises(ValueError, match="unknown pad mode"):
        data.Pad((), "mirror")


def test_tile_expand_upsample_gather():
    assert data.tile(data.Tile((1, 2, 1, 1)), X).shape == (2, 16, 4, 6)
    e = data.expand(data.Expand((3, 1, 1, 1, 1)), X)
    assert e.shape == (3, 2, 8, 4, 6) and e.flags.writeable
    u = data.upsample(data.Upsample(2, 3), X)
    np.testing.assert_array_equal(u[..., ::2, ::3], X)
    idx = np.array([[0.0, -1.0]], np.float32)
    np.testing.assert_array_equal(data.gather(data.Gather(1), X, idx), X[:, [[0, 7]]])
    with pytest.raises(ValueError, match="out of range"):
        data.gather(data.Gather(1), X, np.array([8.0]))


def test_stored_move_clamps_relu_at_the_zero_point():
    out = quantized("i8", 0.5, 3, -128, 127)
    q = np.array([[[-5.0, 2.0, 4.0, 9.0]]], np.float32)
    p = data.Stored(data.Reshape((4,)), Relu(True, 2.0), out)
    assert data.stored(p, data.reshape, q).tolist() == [3, 3, 4, 7]  # 3 + round(2 / 0.5)
    assert data.stored(data.Stored(data.Reshape((4,)), Relu(), out), data.reshape, q).shape == (4,)
