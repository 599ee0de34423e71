"""The bmodel in the device simulator: data movement as DMA copies, a CPU
subnet (TopK) between TPU subnets, bit-exact with the TPU interpreter in
every mode, model_runner on a bmodel (outputs, --dump_all_tensors,
--out_fixed), and every bad input ending with one line and exit status 1."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tiny_cnn import transform_and_calibrate
from tools_helpers import one_line_error, run_main

from tpuc.tools import model_deploy, model_runner


def movement_model(path) -> None:
    """x[1,4,6,6] -> Conv c -> Transpose t -> Slice s -> Split (a, b) ->
    Concat cat -> Reshape r -> TopK (v, i) -> Relu y (from v)."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype("f4") * 0.3, "W")
    consts = [
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in [
            ("starts", [0, 1]),
            ("ends", [6, 5]),
            ("axes", [1, 2]),
            ("steps", [2, 1]),
            ("split", [2, 2]),
            ("shape", [1, -1]),
            ("k", [5]),
        ]
    ]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
        node("Slice", ["t", "starts", "ends", "axes", "steps"], ["s"]),
        node("Split", ["s", "split"], ["a", "b"], axis=2),
        node("Concat", ["b", "a"], ["cat"], axis=2),
        node("Reshape", ["cat", "shape"], ["r"]),
        node("TopK", ["r", "k"], ["v", "i"], axis=1),
        node("Relu", ["v"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "movement",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [w, *consts],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def movement(tmp_path_factory):
    work = tmp_path_factory.mktemp("movement")
    movement_model(work / "mv.onnx")
    return transform_and_calibrate(work, "mv", (1, 4, 6, 6), seed=5, samples=3)


@pytest.mark.parametrize(
    "chip, mode, extra",
    [
        ("bm1684x", "F32", []),
        ("bm1684x", "F16", []),
        ("bm1684x", "INT8", []),
        ("bm1684x", "INT8", ["--asymmetric"]),
        ("cv183x", "BF16", []),
        ("cv183x", "INT8", []),
    ],
)
def test_dma_copies_and_cpu_subnet_are_bit_exact(movement, tmp_path, capsys, chip, mode, extra):
    from tpuc.target.bmodel import load_bmodel_file

    argv = ["--mlir", str(movement / "mv.mlir"), "--chip", chip, "--quantize", mode, *extra]
    argv += ["--calibration_table", str(movement / "mv_cali_table")] if mode == "INT8" else []
    argv += ["--test_input", str(movement / "mv_in_f32.npz")]
    argv += ["--model", str(tmp_path / "mv.bmodel")]
    code, out, err = run_main(model_deploy.main, argv, capsys)
    assert code == 0, err
    assert "bmodel matches the TPU interpreter bit for bit" in out
    param = load_bmodel_file(tmp_path / "mv.bmodel").nets[0].parameters[0]
    assert [s.mode for s in param.subnets] == ["TPU", "CPU", "TPU"]
    assert len(param.subnets[1].cpu_params) == 1  # the TopK
    groups = param.subnets[0].cmd_groups
    assert groups[0].gdma_num >= 4  # transpose, slice, split, concat as copies
    assert groups[0].bdc_num >= 1  # the conv


@pytest.fixture(scope="module")
def int8_bmodel(prepared, tmp_path_factory):  # noqa: F811
    """The tiny CNN deployed for bm1684x INT8 (with its location json), every
    op a global layer: --dump_all_tensors then sees every tensor in DDR."""
    out = tmp_path_factory.mktemp("int8")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--test_input", str(prepared / "cnn_in_f32.npz"), "--model", str(out / "cnn.bmodel")]
    assert model_deploy.run([*argv, "--disable_layer_group"]) == 0
    return out


def runner(argv, capsys):
    return run_main(model_runner.main, argv, capsys)


def test_model_runner_on_a_bmodel(prepared, int8_bmodel, tmp_path, capsys):  # noqa: F811
    d = int8_bmodel
    base = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(d / "cnn.bmodel")]
    code, _, err = runner([*base, "--output", str(tmp_path / "o.npz")], capsys)
    assert code == 0, err
    with (
        np.load(tmp_path / "o.npz") as got,
        np.load(d / "cnn_bm1684x_int8_sym_tpu_outputs.npz") as tpu,
    ):
        assert np.array_equal(got["logits"], tpu["logits"])
    code, _, err = runner(
        [*base, "--output", str(tmp_path / "all.npz"), "--dump_all_tensors"], capsys
    )
    assert code == 0, err
    tpu_mlir = d / "cnn_bm1684x_int8_sym_tpu.mlir"
    argv = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(tpu_mlir)]
    code, _, err = runner(
        [*argv, "--output", str(tmp_path / "ref.npz"), "--dump_all_tensors"], capsys
    )
    assert code == 0, err
    with np.load(tmp_path / "all.npz") as got, np.load(tmp_path / "ref.npz") as ref:
        assert set(got.files) == set(ref.files) and len(got.files) > 5
        for name in ref.files:
            assert np.array_equal(got[name], ref[name]), name
    fixed = ["--dump_all_tensors", "--out_fixed"]
    code, _, err = runner([*base, "--output", str(tmp_path / "fx.npz"), *fixed], capsys)
    assert code == 0, err
    code, _, err = runner([*argv, "--output", str(tmp_path / "fx_ref.npz"), *fixed], capsys)
    assert code == 0, err
    with np.load(tmp_path / "fx.npz") as got, np.load(tmp_path / "fx_ref.npz") as ref:
        q = got["r1"]  # a u8 activation (after relu): its stored integers
        assert np.array_equal(q, np.round(q)) and q.min() >= 0 and q.max() <= 255
        for name in ref.files:
            assert np.array_equal(got[name], ref[name]), name


def _flip_coefficient_byte(data: bytes) -> bytes:
    from tpuc.target.bmodel import read_bmodel

    # the blob starts after the header and the flatbuffer; coefficients come first
    header_size = int.from_bytes(data[4:8], "little")
    fb_size = int.from_bytes(data[8:12], "little")
    assert read_bmodel(data, "x").nets[0].parameters[0].coeff
    blob = header_size + fb_size
    return data[:blob] + bytes([data[blob] ^ 0xFF]) + data[blob + 1 :]


@pytest.mark.parametrize(
    "damage, extra, needle",
    [
        (lambda b: b[: len(b) // 2], [], "truncated bmodel"),
        (_flip_coefficient_byte, [], "checksum"),
        (None, ["--chip", "cv183x"], "the bmodel is for BM1684X, the device is cv183x"),
        (None, ["--input", "{d}/wrong_shape.npz"], "input 'x' has shape [1, 3, 4, 4]"),
        (None, ["--input", "{d}/wrong_dtype.npz"], "input 'x' has dtype int32"),
        (None, ["--input", "{d}/no_x.npz"], "inputs missing for the bmodel: x"),
        (None, ["--dump_all_tensors", "--model", "{d}/alone/cnn.bmodel"], "tensor_location"),
    ],
)
def test_bad_input(prepared, int8_bmodel, tmp_path, capsys, damage, extra, needle):  # noqa: F811
    model = tmp_path / "cnn.bmodel"
    data = (int8_bmodel / "cnn.bmodel").read_bytes()
    model.write_bytes(damage(data) if damage else data)
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "cnn.bmodel").write_bytes(data)
    np.savez(tmp_path / "wrong_shape.npz", x=np.zeros((1, 3, 4, 4), np.float32))
    np.savez(tmp_path / "wrong_dtype.npz", x=np.zeros((1, 3, 8, 8), np.int32))
    np.savez(tmp_path / "no_x.npz", y=np.zeros((1, 3, 8, 8), np.float32))
    argv = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(model)]
    argv += ["--output", str(tmp_path / "o.npz")] + [e.format(d=tmp_path) for e in extra]
    code, _, err = runner(argv, capsys)
    assert code == 1 and needle in one_line_error(err), err
    assert not (tmp_path / "o.npz").exists()
