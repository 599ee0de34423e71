"""Preprocessing of test inputs against hand-computed tensors."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tpuc.base.errors import TpucError
from tpuc.ir.preprocess import (
    InputSpec,
    Preprocess,
    annotate_input,
    load_inputs,
    preprocess_of,
)

# A 2x3 RGB image: pixel (row, col) = (R, G, B)
PIXELS = np.array(
    [
        [[10, 20, 30], [40, 50, 60], [70, 80, 90]],
        [[100, 110, 120], [130, 140, 150], [160, 170, 180]],
    ],
    dtype=np.uint8,
)


def save(tmp_path, array, name="img.png"):
    path = tmp_path / name
    Image.fromarray(array).save(path)
    return str(path)


def test_bgr_mean_scale_nchw(tmp_path):
    path = save(tmp_path, PIXELS)
    pp = Preprocess(mean=(1.0, 2.0, 3.0), scale=(0.5, 0.25, 2.0), pixel_format="bgr")
    x = load_inputs([path], [InputSpec("in", (2, 3, 2, 3), pp)])["in"]
    # channel 0 is B: (B - 1) * 0.5, channel 1 is G: (G - 2) * 0.25, channel 2 is R: (R - 3) * 2
    expected_one = np.array(
        [
            [[14.5, 29.5, 44.5], [59.5, 74.5, 89.5]],
            [[4.5, 12.0, 19.5], [27.0, 34.5, 42.0]],
            [[14.0, 74.0, 134.0], [194.0, 254.0, 314.0]],
        ],
        dtype=np.float32,
    )
    assert x.dtype == np.float32 and x.shape == (2, 3, 2, 3)
    np.testing.assert_array_equal(x[0], expected_one)
    np.testing.assert_array_equal(x[1], expected_one)  # repeated over the batch


def test_rgb_nhwc(tmp_path):
    path = save(tmp_path, PIXELS)
    pp = Preprocess(pixel_format="rgb", channel_format="nhwc", mean=(10.0,))
    x = load_inputs([path], [InputSpec("in", (1, 2, 3, 3), pp)])["in"]
    np.testing.assert_array_equal(x[0], PIXELS.astype(np.float32) - 10.0)


def test_bilinear_upscale(tmp_path):
    # [0, 100] stretched to 4 columns (half-pixel centers): 0, 25, 75, 100
    path = save(tmp_path, np.array([[0, 100]], dtype=np.uint8))
    pp = Preprocess(pixel_format="gray", mean=(0.0,), scale=(1.0,))
    x = load_inputs([path], [InputSpec("in", (1, 1, 1, 4), pp)])["in"]
    np.testing.assert_array_equal(x.reshape(-1), [0.0, 25.0, 75.0, 100.0])


def test_resize_dims_larger_than_input_center_crops(tmp_path):
    gray = (np.arange(6)[:, None] * 10 + np.arange(6)[None, :]).astype(np.uint8)
    path = save(tmp_path, gray)
    pp = Preprocess(resize_dims=(6, 6), pixel_format="gray")
    x = load_inputs([path], [InputSpec("in", (1, 1, 4, 4), pp)])["in"]
    np.testing.assert_array_equal(x[0, 0], gray[1:5, 1:5].astype(np.float32))


@pytest.mark.parametrize("pad_type, rows", [("center", [1, 2]), ("normal", [0, 1])])
def test_letterbox(tmp_path, pad_type, rows):
    image = np.full((2, 4), 200, dtype=np.uint8)  # 4 wide, 2 high: fits a 4x4 input as is
    path = save(tmp_path, image)
    pp = Preprocess(
        keep_aspect_ratio=True, pad_value=7, pad_type=pad_type, pixel_format="gray", mean=(0.0,)
    )
    x = load_inputs([path], [InputSpec("in", (1, 1, 4, 4), pp)])["in"][0, 0]
    expected = np.full((4, 4), 7.0, dtype=np.float32)
    expected[rows] = 200.0
    np.testing.assert_array_equal(x, expected)


def test_short_side_scale_center_crops(tmp_path):
    image = np.tile((np.arange(8) * 10).astype(np.uint8), (4, 1))  # 8 wide, 4 high
    path = save(tmp_path, image)
    pp = Preprocess(keep_aspect_ratio=True, keep_ratio_mode="short_side_scale", pixel_format="gray")
    x = load_inputs([path], [InputSpec("in", (1, 1, 4, 4), pp)])["in"][0, 0]
    np.testing.assert_array_equal(x, np.tile([20.0, 30.0, 40.0, 50.0], (4, 1)))


def test_npz_and_npy_inputs(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(1, 6)
    b = np.ones((2, 2), dtype=np.float64)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    specs = [InputSpec("a", (1, 6)), InputSpec("b", (2, 2))]
    from_npz = load_inputs([str(tmp_path / "in.npz")], specs)
    from_npy = load_inputs([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], specs)
    for inputs in (from_npz, from_npy):
        np.testing.assert_array_equal(inputs["a"], a)
        assert inputs["b"].dtype == np.float32


@pytest.mark.parametrize(
    "files, needle",
    [
        (["in.npz"], "no array named 'b' (model input of shape [2, 2])"),
        (["bad.npz"], "input 'a' has shape [6], the model expects [1, 6]"),
        (["a.npy"], "1 test input file(s) given for 2 model input(s)"),
        (["a.npy", "missing.png"], "missing.png: no such file"),
        (["a.npy", "img.png"], "input 'b' of shape [2, 2] (nchw) does not take an image"),
    ],
)
def test_bad_inputs_name_the_culprit(tmp_path, files, needle):
    np.savez(tmp_path / "in.npz", a=np.zeros((1, 6)))
    np.savez(tmp_path / "bad.npz", a=np.zeros(6), b=np.zeros((2, 2)))
    np.save(tmp_path / "a.npy", np.zeros((1, 6)))
    save(tmp_path, PIXELS)
    specs = [InputSpec("a", (1, 6)), InputSpec("b", (2, 2))]
    with pytest.raises(TpucError) as info:
        load_inputs([str(tmp_path / f) for f in files], specs)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_unreadable_image_names_the_file(tmp_path):
    (tmp_path / "junk.png").write_bytes(b"\x89PNG but not really")
    with pytest.raises(TpucError, match=r"junk.png: cannot read it as an image \("):
        load_inputs([str(tmp_path / "junk.png")], [InputSpec("in", (1, 3, 2, 3), Preprocess())])


def test_pixel_format_must_match_channels(tmp_path):
    path = save(tmp_path, PIXELS)
    with pytest.raises(TpucError, match="--pixel_format gray gives 1 channel"):
        load_inputs([path], [InputSpec("in", (1, 3, 2, 3), Preprocess(pixel_format="gray"))])


def test_attributes_round_trip_through_input_op():
    from xdsl.ir import Block

    from tpuc.dialects.base import tensor_type
    from tpuc.dialects.top import InputOp

    block = Block(arg_types=[tensor_type([1, 3, 8, 8])])
    op = InputOp.make([block.args[0]], "x", result_types=[tensor_type([1, 3, 8, 8])])
    pp = Preprocess(mean=(1.0,), scale=(0.5, 0.25, 2.0), pixel_format="rgb", keep_aspect_ratio=True)
    assert annotate_input(op, pp)
    assert op.value("mean") == [1.0, 1.0, 1.0] and op.value("resize_dims") == [8, 8]
    back = preprocess_of(op)
    assert back == Preprocess(
        resize_dims=(8, 8),
        mean=(1.0, 1.0, 1.0),
        scale=(0.5, 0.25, 2.0),
        pixel_format="rgb",
        keep_aspect_ratio=True,
    )


def test_non_image_input_is_not_annotated():
    from xdsl.ir import Block

    from tpuc.dialects.base import tensor_type
    from tpuc.dialects.top import InputOp

    block = Block(arg_types=[tensor_type([1, 10])])
    op = InputOp.make([block.args[0]], "x", result_types=[tensor_type([1, 10])])
    assert not annotate_input(op, Preprocess())
    assert preprocess_of(op) is None
