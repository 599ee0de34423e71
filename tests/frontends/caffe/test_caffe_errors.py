"""Bad Caffe input: each is one line that names the layer (or the flag)."""

from __future__ import annotations

import pytest
from caffe_layers import NetBuilder, build_case

from tpuc.base.errors import TpucError
from tpuc.frontends.caffe import convert_caffe
from tpuc.tools import model_transform


def one_line_error(fn) -> str:
    with pytest.raises(TpucError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message
    return message


def convert(prototxt, caffemodel):
    return lambda: convert_caffe(str(prototxt), str(caffemodel), "m")


def test_unknown_layer_types_are_listed_at_once(tmp_path):
    b = NetBuilder("unknown")
    b.input("data", [1, 2, 3, 3])
    b.add("a", "Foo", ["data"])
    b.add("b", "Bar", ["a"])
    b.add("c", "Foo", ["b"])
    b.add("relu", "ReLU", ["c"])
    message = one_line_error(convert(*b.write(tmp_path)))
    assert "2 layer type(s) tpuc cannot convert" in message
    assert "Foo (layers 'a', 'c')" in message
    assert "Bar (layer 'b')" in message


def test_unknown_field_names_line_field_and_layer(tmp_path):
    prototxt, caffemodel, _ = build_case("conv_group_dilation", tmp_path)
    text = prototxt.read_text().replace("num_output:", "num_outputs:")
    prototxt.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "num_outputs" in t)
    message = one_line_error(convert(prototxt, caffemodel))
    assert message.startswith(f"{prototxt}:{line}: layer 'conv': ")
    assert "field 'num_outputs' is not known" in message


def test_blob_shape_mismatch(tmp_path):
    prototxt, caffemodel, _ = build_case("conv_group_dilation", tmp_path)
    prototxt.write_text(prototxt.read_text().replace("num_output: 6", "num_output: 8"))
    message = one_line_error(convert(prototxt, caffemodel))
    assert "layer 'conv' (Convolution)" in message
    assert "caffemodel blob 0 has shape [6, 2, 3, 3], the prototxt implies [8, 2, 3, 3]" in message


def test_missing_blobs_name_the_layer(tmp_path):
    prototxt, caffemodel, _ = build_case("batchnorm_scale_inplace", tmp_path)
    prototxt.write_text(prototxt.read_text().replace('name: "scale"', 'name: "scale_renamed"'))
    message = one_line_error(convert(prototxt, caffemodel))
    assert "layer 'scale_renamed' (Scale): the caffemodel has no blobs for it" in message


def test_caffemodel_of_another_network(tmp_path):
    prototxt, _, _ = build_case("conv_group_dilation", tmp_path)
    _, other, _ = build_case("inner_product", tmp_path)
    message = one_line_error(convert(prototxt, other))
    assert "a caffemodel for another network (network 'inner_product')" in message
    assert "'conv_group_dilation'" in message


def test_model_transform_needs_model_data(tmp_path):
    prototxt, _, _ = build_case("conv_group_dilation", tmp_path)
    argv = ["--model_name", "m", "--model_def", str(prototxt), "--mlir", str(tmp_path / "m.mlir")]
    message = one_line_error(lambda: model_transform.run(argv))
    assert message.startswith("--model_data: missing")
    assert not (tmp_path / "m.mlir").exists()


def test_caffemodel_given_as_model_def(tmp_path):
    _, caffemodel, _ = build_case("conv_group_dilation", tmp_path)
    argv = ["--model_name", "m", "--model_def", str(caffemodel), "--mlir", str(tmp_path / "m.mlir")]
    message = one_line_error(lambda: model_transform.run(argv))
    assert "pass it as --model_data" in message


def test_binary_file_as_prototxt(tmp_path):
    _, caffemodel, _ = build_case("conv_group_dilation", tmp_path)
    fake = tmp_path / "fake.prototxt"
    fake.write_bytes(caffemodel.read_bytes())
    message = one_line_error(convert(fake, caffemodel))
    assert str(fake) in message
