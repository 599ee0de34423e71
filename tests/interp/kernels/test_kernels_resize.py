"""Resize (top.Interp) and Upsample kernels against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort

from tpuc.dialects import top

X = rand(1, 2, 5, 7)

CASES = [
    ("nearest", "asymmetric", "floor"),
    ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "align_corners", "round_prefer_floor"),
    ("nearest", "tf_half_pixel_for_nn", "round_prefer_ceil"),
    ("nearest", "half_pixel", "ceil"),
    ("linear", "half_pixel", "round_prefer_floor"),
    ("linear", "pytorch_half_pixel", "round_prefer_floor"),
    ("linear", "align_corners", "round_prefer_floor"),
    ("linear", "asymmetric", "round_prefer_floor"),
    ("cubic", "half_pixel", "round_prefer_floor"),
    ("cubic", "align_corners", "round_prefer_floor"),
    ("cubic", "asymmetric", "round_prefer_floor"),
]


def onnx_attrs(mode, coord, nearest, **extra):
    return dict(mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest, **extra)


def top_attrs(mode, coord, nearest, target, **extra):
    return dict(mode=mode, coord_mode=coord, nearest_mode=nearest, target_shape=target, **extra)


@pytest.mark.parametrize("mode,coord,nearest", CASES)
@pytest.mark.parametrize("sizes", [[1, 2, 11, 4], [1, 2, 3, 14], [1, 2, 1, 1]])
def test_resize_sizes(mode, coord, nearest, sizes):
    ref = run_ort(
        "Resize", [X, None, None, np.array(sizes, np.int64)], onnx_attrs(mode, coord, nearest)
    )[0]
    ours = run_kernel(top.InterpOp, [X], top_attrs(mode, coord, nearest, sizes[2:]))
    assert_close(ours, ref)


@pytest.mark.parametrize("mode,coord,nearest", CASES)
def test_resize_scales(mode, coord, nearest):
    """Non-integral scales: the given scale, not out/in, maps coordinates."""
    scales = np.array([1, 1, 1.5, 0.6], np.float32)
    ref = run_ort("Resize", [X, None, scales], onnx_attrs(mode, coord, nearest))[0]
    target = [int(np.floor(5 * 1.5)), int(np.floor(7 * np.float32(0.6)))]
    ours = run_kernel(
        top.InterpOp, [X], top_attrs(mode, coord, nearest, target, scales=[1.5, float(scales[3])])
    )
    assert_close(ours, ref)


def test_resize_cubic_exclude_outside_and_coeff():
    sizes = np.array([1, 2, 9, 9], np.int64)
    attrs = onnx_attrs(
        "cubic", "half_pixel", "round_prefer_floor", exclude_outside=1, cubic_coeff_a=-0.5
    )
    ref = run_ort("Resize", [X, None, None, sizes], attrs)[0]
    ours = run_kernel(
        top.InterpOp,
        [X],
        top_attrs(
            "cubic",
            "half_pixel",
            "round_prefer_floor",
            [9, 9],
            exclude_outside=True,
            cubic_coeff_a=-0.5,
        ),
    )
    assert_close(ours, ref)


def test_resize_full_rank_target():
    sizes = np.array([1, 2, 10, 14], np.int64)
    ref = run_ort("Resize", [X, None, None, sizes], onnx_attrs("linear", "half_pixel", "floor"))[0]
    ours = run_kernel(top.InterpOp, [X], top_attrs("linear", "half_pixel", "floor", list(sizes)))
    assert_close(ours, ref)


def test_upsample():
    scales = np.array([1, 1, 2, 3], np.float32)
    ref = run_ort("Resize", [X, None, scales], onnx_attrs("nearest", "asymmetric", "floor"))[0]
    assert_close(run_kernel(top.UpsampleOp, [X], dict(scale_h=2, scale_w=3)), ref)
