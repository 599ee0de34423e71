"""Data-movement kernels against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort

from tpuc.dialects import top

X = rand(2, 3, 4, 5)


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def test_concat_and_split():
    y = rand(2, 1, 4, 5)
    assert_close(
        run_kernel(top.ConcatOp, [X, y], dict(axis=1)), run_ort("Concat", [X, y], dict(axis=1))[0]
    )
    refs = run_ort("Split", [X, i64(1, 3, 1)], dict(axis=-1), n_outputs=3)
    ours = run_kernel(
        top.SplitOp, [X], dict(axis=-1, split_size=[1, 3, 1]), result_names=["a", "b", "c"]
    )
    assert len(ours) == 3
    for o, r in zip(ours, refs, strict=True):
        assert_close(np.asarray(o), r)


SLICES = [
    # starts, ends, axes, steps (ONNX) -> full-rank offset/ends/steps for TOP
    ([0, 1], [2, 4], [1, 2], [1, 2]),
    ([-1, 4], [-100, 0], [1, 3], [-1, -2]),
    ([3, -2], [0, -6], [2, 3], [-1, -1]),
    ([1], [1000], [3], [3]),
    ([2], [-1000], [2], [-2]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice(starts, ends, axes, steps):
    ref = run_ort("Slice", [X, i64(*starts), i64(*ends), i64(*axes), i64(*steps)])[0]
    offset, end, step = [0] * 4, list(X.shape), [1] * 4
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        offset[a], end[a], step[a] = s, e, st
    ours = run_kernel(top.SliceOp, [X], dict(offset=offset, ends=end, steps=step))
    assert_close(np.asarray(ours, np.float32), ref)


def test_reshape_family():
    assert_close(
        run_kernel(top.ReshapeOp, [X], dict(shape=[6, -1])), run_ort("Reshape", [X, i64(6, -1)])[0]
    )
    assert_close(
        run_kernel(top.FlattenOp, [X], dict(start_dim=1, end_dim=-1)),
        run_ort("Flatten", [X], dict(axis=1))[0],
    )
    assert run_kernel(top.FlattenOp, [X], dict(start_dim=1, end_dim=2)).shape == (2, 12, 5)
    assert_close(
        run_kernel(top.ReshapeOp, [X], dict(shape=[0, -1, 5])),
        run_ort("Reshape", [X, i64(0, -1, 5)])[0],
    )
    y = rand(1, 3, 1, 2)
    assert_close(
        run_kernel(top.SqueezeOp, [y], dict(axes=[0, -2])), run_ort("Squeeze", [y, i64(0, -2)])[0]
    )
    assert_close(run_kernel(top.SqueezeOp, [y]), run_ort("Squeeze", [y])[0])
    assert_close(
        run_kernel(top.UnsqueezeOp, [X], dict(axes=[0, -1])),
        run_ort("Unsqueeze", [X, i64(0, -1)])[0],
    )
    assert_close(
        run_kernel(top.PermuteOp, [X], dict(order=[0, 2, 3, 1])),
        run_ort("Transpose", [X], dict(perm=[0, 2, 3, 1]))[0],
    )


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    x = rand(1, 8, 3, 2)
    ref = run_ort("DepthToSpace", [x], dict(blocksize=2, mode=mode))[0]
    ours = run_kernel(top.Depth2SpaceOp, [x], dict(block_h=2, block_w=2, is_CRD=mode == "CRD"))
    assert_close(ours, ref)


def test_space_to_depth_round_trip():
    x = rand(1, 2, 4, 6)
    ref = run_ort("SpaceToDepth", [x], dict(blocksize=2))[0]
    ours = run_kernel(top.Depth2SpaceOp, [x], dict(block_h=2, block_w=2, is_inversed=True))
    assert_close(ours, ref)
    crd = run_kernel(
        top.Depth2SpaceOp, [x], dict(block_h=2, block_w=2, is_inversed=True, is_CRD=True)
    )
    back = run_kernel(top.Depth2SpaceOp, [crd], dict(block_h=2, block_w=2, is_CRD=True))
    assert_close(back, x)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(mode):
    pads = [0, 1, 2, 0, 0, 2, 1, 3]
    ref = run_ort("Pad", [X, i64(*pads), np.float32(1.5)], dict(mode=mode))[0]
    ours = run_kernel(top.PadOp, [X], dict(paddings=pads, mode=mode, val=1.5))
    assert_close(ours, ref)


def test_pad_negative_crops():
    pads = [0, -1, 1, 0, 0, 0, -2, 1]
    ref = run_ort("Pad", [X, i64(*pads)], dict(mode="constant"))[0]
    assert_close(run_kernel(top.PadOp, [X], dict(paddings=pads)), ref)


def test_tile_and_expand():
    assert_close(
        run_kernel(top.TileOp, [X], dict(tile=[1, 2, 1, 3])),
        run_ort("Tile", [X, i64(1, 2, 1, 3)])[0],
    )
    y = rand(3, 1)
    assert_close(
        run_kernel(top.ExpandOp, [y], dict(shape=[2, 1, 4])),
        run_ort("Expand", [y, i64(2, 1, 4)])[0],
    )
    assert_close(
        run_kernel(top.ExpandOp, [y], dict(shape=[3, 1])), run_ort("Expand", [y, i64(3, 1)])[0]
    )


@pytest.mark.parametrize("axis", [0, 2, -1])
def test_gather(axis):
    idx = np.array([[0, -1], [1, 1]], dtype=np.int64)
    ref = run_ort("Gather", [X, idx], dict(axis=axis))[0]
    ours = run_kernel(top.GatherOp, [X, idx.astype(np.float32)], dict(axis=axis))
    assert_close(ours, ref)
    scalar = run_kernel(top.GatherOp, [X, np.array(1, np.float32)], dict(axis=axis))
    assert_close(scalar, run_ort("Gather", [X, np.array(1, np.int64)], dict(axis=axis))[0])


def test_gather_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        run_kernel(top.GatherOp, [X, np.array([5], np.float32)], dict(axis=1))
