"""Pre-quantized INT8 TFLite models (float I/O, QUANTIZE/DEQUANTIZE at the
edges, int8 activations and per-axis int8 weights): the model's own scales
and zero points become the calibration table model_transform writes, and
model_deploy --quantize INT8 needs no --calibration_table. The deployed
INT8 outputs are compared with LiteRT's in units of the output scale."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_builder import INT8, INT32, Op, T, build

pytest.importorskip("ai_edge_litert")

from tpuc.frontends.tflite.reference import run_tflite  # noqa: E402
from tpuc.tools import model_deploy, model_runner, model_transform  # noqa: E402

RNG = np.random.default_rng(23)
S_IN, ZP_IN = 4.0 / 127, -5
S_OUT, ZP_OUT = 0.05, -128


def int8_conv_model(act: int = 1) -> bytes:
    """x (float) -> QUANTIZE -> CONV_2D 3x3 SAME (per-axis int8 weights,
    int32 bias, fused activation) -> DEQUANTIZE -> y (float)."""
    w = RNG.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3
    s_w = np.abs(w).reshape(6, -1).max(axis=1) / 127
    qw = np.round(w / s_w[:, None, None, None]).astype(np.int8)
    b = RNG.standard_normal(6).astype(np.float32)
    qb = np.round(b / (S_IN * s_w)).astype(np.int32)
    tensors = [
        T("x", [1, 8, 8, 3]),
        T("xq", [1, 8, 8, 3], type=INT8, scale=[S_IN], zero_point=[ZP_IN]),
        T("w", [6, 3, 3, 3], qw, scale=list(s_w), zero_point=[0] * 6),
        T("b", [6], qb, type=INT32, scale=list(S_IN * s_w), zero_point=[0] * 6),
        T("yq", [1, 8, 8, 6], type=INT8, scale=[S_OUT], zero_point=[ZP_OUT]),
        T("y", [1, 8, 8, 6]),
    ]
    opts = ("Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1,
                              "FusedActivationFunction": act, "DilationWFactor": 1,
                              "DilationHFactor": 1})  # fmt: skip
    ops = [Op("QUANTIZE", [0], [1]), Op("CONV_2D", [1, 2, 3], [4], opts),
           Op("DEQUANTIZE", [4], [5])]  # fmt: skip
    return build(tensors, ops, [0], [5])


def test_prequantized_conv_deploys_with_its_own_scales(tmp_path):
    path = tmp_path / "q.tflite"
    path.write_bytes(int8_conv_model())
    x = RNG.standard_normal((1, 8, 8, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "q", "--model_def", str(path), "--test_input",
            str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "q.mlir"),
            "--tolerance", "0.99,0.9"]  # fmt: skip
    assert model_transform.run(argv) == 0  # TOP float against LiteRT's dequantized int8
    table = (tmp_path / "q_cali_table").read_text()
    assert 'module.cali_table = "q_cali_table"' in (tmp_path / "q.mlir").read_text()
    s_in = float(np.float32(S_IN))  # the model stores float32 scales, written exactly
    lo, hi = (-128 - ZP_IN) * s_in, (127 - ZP_IN) * s_in
    assert f" {lo!r} {hi!r}" in table
    argv = ["--mlir", str(tmp_path / "q.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--test_input", str(tmp_path / "q_in_f32.npz"), "--tolerance", "0.99,0.9",
            "--model", str(tmp_path / "q.bmodel")]  # fmt: skip
    assert model_deploy.run(argv) == 0  # no --calibration_table; bmodel bit-exact
    tpu = np.load(next(tmp_path.glob("q_bm1684x_int8_asym_tpu_outputs.npz")))["y"]
    ref = run_tflite(str(path), {"x": x})["y"]
    lsb = np.abs(np.round((tpu - ref) / S_OUT))
    within_one = float(np.mean(lsb <= 1))
    assert within_one >= 0.99, (within_one, float(np.mean(lsb == 0)))


# --- the INT8 per-op suite ---------------------------------------------------------------
# op -> (x shape, float constants, options, weight quantization axis, output qparams:
# "range" (from the float op's output on the test input), "same" (the input's, as
# TFLite requires for pools and data movement) or a fixed (scale, zero point))
X = [1, 8, 8, 4]
CONV = ("Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1, "DilationWFactor": 1,
                          "DilationHFactor": 1})  # fmt: skip
DW = ("DepthwiseConv2DOptions", {**CONV[1], "DepthMultiplier": 1})
POOL = ("Pool2DOptions", {"Padding": 0, "StrideW": 2, "StrideH": 2, "FilterWidth": 3,
                          "FilterHeight": 3})  # fmt: skip
INT8_CASES = {
    "conv": ("CONV_2D", X, [(6, 3, 3, 4), (6,)], CONV, 0, "range"),
    "depthwise": ("DEPTHWISE_CONV_2D", X, [(1, 3, 3, 4), (4,)], DW, 3, "range"),
    "fully_connected": ("FULLY_CONNECTED", [2, 16], [(5, 16), (5,)], None, 0, "range"),
    "add": ("ADD", X, [], ("AddOptions", {}), None, "range"),
    "mul": ("MUL", X, [], ("MulOptions", {}), None, "range"),
    "avg_pool": ("AVERAGE_POOL_2D", X, [], POOL, None, "same"),
    "max_pool": ("MAX_POOL_2D", X, [], POOL, None, "same"),
    "concat": ("CONCATENATION", X, [], ("ConcatenationOptions", {"Axis": 3}), None, "same"),
    "logistic": ("LOGISTIC", X, [], None, None, (1 / 256, -128)),
    "tanh": ("TANH", X, [], None, None, (1 / 128, 0)),
    "softmax": ("SOFTMAX", [2, 10], [], ("SoftmaxOptions", {"Beta": 1.0}), None, (1 / 256, -128)),
    "hard_swish": ("HARD_SWISH", X, [], None, None, "range"),
}
TWO_INPUTS = ("ADD", "MUL", "CONCATENATION")


def _float_out(data: bytes, tmp_path, feed) -> np.ndarray:
    path = tmp_path / "float.tflite"
    path.write_bytes(data)
    return next(iter(run_tflite(str(path), feed).values()))


def int8_case(case: str, tmp_path, feed) -> bytes:
    op, x, consts, options, axis, out_q = INT8_CASES[case]
    n_in = 2 if op in TWO_INPUTS else 1
    rng = np.random.default_rng(5)
    floats = [rng.standard_normal(s).astype(np.float32) * 0.4 for s in consts]
    out_shape = list(_float_shape(op, x, floats, options, n_in, tmp_path, feed))
    in_q = [(4.0 / 127 * (i + 1), -5 + 7 * i) for i in range(n_in)]
    if out_q == "range":
        y = _float_out(_model(op, x, floats, options, n_in, out_shape, None, None, None),
                       tmp_path, feed)  # fmt: skip
        lo, hi = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
        scale = (hi - lo) / 255
        out_q = (scale, int(round(-128 - lo / scale)))
    elif out_q == "same":
        in_q = [in_q[0]] * n_in
        out_q = in_q[0]
    return _model(op, x, floats, options, n_in, out_shape, in_q, out_q, axis)


def _float_shape(op, x, floats, options, n_in, tmp_path, feed):
    from ai_edge_litert.interpreter import Interpreter

    path = tmp_path / "probe.tflite"
    path.write_bytes(_model(op, x, floats, options, n_in, x, None, None, None))
    interp = Interpreter(model_path=str(path))
    interp.allocate_tensors()
    return interp.get_output_details()[0]["shape"]


def _model(op, x, floats, options, n_in, out_shape, in_q, out_q, axis) -> bytes:
    """Float model when `in_q` is None, else x -> QUANTIZE -> op (int8) ->
    DEQUANTIZE -> y with per-axis int8 weights and int32 biases."""
    tensors = [T(f"x{i}", x) for i in range(n_in)]
    inputs = list(range(n_in))
    if in_q is not None:
        for i, (s, zp) in enumerate(in_q):
            tensors.append(T(f"x{i}q", x, type=INT8, scale=[s], zero_point=[zp]))
        ops = [Op("QUANTIZE", [i], [n_in + i]) for i in range(n_in)]
        op_inputs = list(range(n_in, 2 * n_in))
    else:
        ops, op_inputs = [], list(inputs)
    s_w = None
    for k, f in enumerate(floats):
        if in_q is None:
            tensors.append(T(f"c{k}", list(f.shape), f))
        elif k == 0:  # weights, per axis
            other = tuple(a for a in range(f.ndim) if a != axis)
            s_w = np.abs(f).max(axis=other) / 127
            shape = [1] * f.ndim
            shape[axis] = -1
            q = np.round(f / s_w.reshape(shape)).astype(np.int8)
            tensors.append(T("w", list(f.shape), q, scale=list(s_w), zero_point=[0] * len(s_w),
                             quantized_dimension=axis))  # fmt: skip
        else:  # bias: scale s_in * s_w
            s_b = in_q[0][0] * s_w
            tensors.append(T("b", list(f.shape), np.round(f / s_b).astype(np.int32), type=INT32,
                             scale=list(s_b), zero_point=[0] * len(s_b)))  # fmt: skip
        op_inputs.append(len(tensors) - 1)
    if in_q is not None:
        tensors.append(T("yq", out_shape, type=INT8, scale=[out_q[0]], zero_point=[out_q[1]]))
        ops.append(Op(op, op_inputs, [len(tensors) - 1], options))
        ops.append(Op("DEQUANTIZE", [len(tensors) - 1], [len(tensors)]))
    else:
        ops.append(Op(op, op_inputs, [len(tensors)], options))
    tensors.append(T("y", out_shape))
    return build(tensors, ops, inputs, [len(tensors) - 1])


@pytest.mark.parametrize("case", sorted(INT8_CASES))
def test_int8_op_within_one_lsb_of_litert(case, tmp_path):
    """Deploy with the model's own scales (no calibration table), bmodel
    bit-exact against the TPU interpreter; the interpreter's int8 output
    against LiteRT's: at least 99% within 1 LSB."""
    op, x, *_ = INT8_CASES[case]
    rng = np.random.default_rng(11)
    n_in = 2 if op in TWO_INPUTS else 1
    feed = {f"x{i}": rng.standard_normal(x).astype(np.float32) for i in range(n_in)}
    data = int8_case(case, tmp_path, feed)
    path = tmp_path / "q.tflite"
    path.write_bytes(data)
    np.savez(tmp_path / "in.npz", **feed)
    argv = ["--model_name", "q", "--model_def", str(path), "--test_input",
            str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "q.mlir"),
            "--tolerance", "0.9,0.5"]  # fmt: skip
    assert model_transform.run(argv) == 0
    argv = ["--mlir", str(tmp_path / "q.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--test_input", str(tmp_path / "q_in_f32.npz"), "--tolerance", "0.9,0.5",
            "--model", str(tmp_path / "q.bmodel")]  # fmt: skip
    assert model_deploy.run(argv) == 0
    tpu = np.load(next(tmp_path.glob("q_bm1684x_int8_asym_tpu_outputs.npz")))["y"]
    ref = run_tflite(str(path), feed)["y"]

    scale = _output_scale(path)
    lsb = np.abs(np.round((tpu - ref) / scale))
    print(f"{case}: equal {np.mean(lsb == 0):.4f}, within 1 LSB {np.mean(lsb <= 1):.4f}")
    assert np.mean(lsb <= 1) >= 0.99, (case, float(np.mean(lsb == 0)), float(lsb.max()))


def _output_scale(path) -> float:
    from tpuc.frontends.tflite.model import load_tflite

    model = load_tflite(str(path))
    return float(next(t for t in model.tensors if t.name == "yq").scales[0])


def conv_relu_model() -> tuple[bytes, float]:
    """x -> QUANTIZE -> CONV_2D (no fused activation, its own output scale)
    -> RELU (another scale) -> DEQUANTIZE -> y: two requantizations."""
    w = RNG.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3
    s_w = np.abs(w).reshape(6, -1).max(axis=1) / 127
    qw = np.round(w / s_w[:, None, None, None]).astype(np.int8)
    qb = np.round(RNG.standard_normal(6) / (S_IN * s_w)).astype(np.int32)
    s_conv, s_relu = 0.061, 0.026
    tensors = [
        T("x", [1, 8, 8, 3]),
        T("xq", [1, 8, 8, 3], type=INT8, scale=[S_IN], zero_point=[ZP_IN]),
        T("w", [6, 3, 3, 3], qw, scale=list(s_w), zero_point=[0] * 6),
        T("b", [6], qb, type=INT32, scale=list(S_IN * s_w), zero_point=[0] * 6),
        T("cq", [1, 8, 8, 6], type=INT8, scale=[s_conv], zero_point=[18]),
        T("yq", [1, 8, 8, 6], type=INT8, scale=[s_relu], zero_point=[-128]),
        T("y", [1, 8, 8, 6]),
    ]
    opts = ("Conv2DOptions", {**CONV[1], "FusedActivationFunction": 0})
    ops = [Op("QUANTIZE", [0], [1]), Op("CONV_2D", [1, 2, 3], [4], opts),
           Op("RELU", [4], [5]), Op("DEQUANTIZE", [5], [6])]  # fmt: skip
    return build(tensors, ops, [0], [6]), s_relu


def test_prequantized_conv_relu_keeps_both_requantizations(tmp_path):
    """The standalone RELU stays its own op (module.pre_quantized), the conv
    requantizes with TFLite's double rounding: every element equals
    LiteRT's (one fused requantization matched only ~68%)."""
    data, s_out = conv_relu_model()
    path = tmp_path / "q.tflite"
    path.write_bytes(data)
    x = RNG.standard_normal((1, 8, 8, 3)).astype(np.float32) * 2
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "q", "--model_def", str(path), "--test_input",
            str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "q.mlir"),
            "--tolerance", "0.9,0.5"]  # fmt: skip
    assert model_transform.run(argv) == 0
    assert "top.Relu" in (tmp_path / "q.mlir").read_text()
    argv = ["--mlir", str(tmp_path / "q.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--test_input", str(tmp_path / "q_in_f32.npz"), "--tolerance", "0.9,0.5",
            "--model", str(tmp_path / "q.bmodel")]  # fmt: skip
    assert model_deploy.run(argv) == 0
    tpu_mlir = next(tmp_path.glob("q_bm1684x_int8_asym_tpu.mlir")).read_text()
    assert 'round_mode = "DoubleRound"' in tpu_mlir
    tpu = np.load(next(tmp_path.glob("q_bm1684x_int8_asym_tpu_outputs.npz")))["y"]
    ref = run_tflite(str(path), {"x": x})["y"]
    lsb = np.abs(np.round((tpu - ref) / s_out))
    assert float(np.mean(lsb == 0)) == 1.0, (float(np.mean(lsb == 0)), float(lsb.max()))


def test_prequantized_requantize_is_kept_and_rounds_as_tflite(tmp_path):
    """QUANTIZE int8 -> int8 at another scale (opcodes written as
    ai-edge-quantizer does: builtin_code only) is a requantization point:
    an AddConst 0 in TOP, TFLite's Requantize as a table in INT8; every
    element equals LiteRT's."""
    s1, s2 = 0.0371, 0.0517
    tensors = [
        T("x", [1, 4, 8, 3]),
        T("xq", [1, 4, 8, 3], type=INT8, scale=[s1], zero_point=[3]),
        T("yq", [1, 4, 8, 3], type=INT8, scale=[s2], zero_point=[-7]),
        T("y", [1, 4, 8, 3]),
    ]
    ops = [Op("QUANTIZE", [0], [1]), Op("QUANTIZE", [1], [2]), Op("DEQUANTIZE", [2], [3])]
    path = tmp_path / "q.tflite"
    path.write_bytes(build(tensors, ops, [0], [3], new_codes_only=True))
    x = RNG.uniform(-5, 5, (1, 4, 8, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "q", "--model_def", str(path), "--test_input",
            str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "q.mlir"),
            "--tolerance", "0.9,0.5"]  # fmt: skip
    assert model_transform.run(argv) == 0
    assert "top.AddConst" in (tmp_path / "q.mlir").read_text()
    argv = ["--mlir", str(tmp_path / "q.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--test_input", str(tmp_path / "q_in_f32.npz"), "--tolerance", "0.9,0.5",
            "--model", str(tmp_path / "q.bmodel")]  # fmt: skip
    assert model_deploy.run(argv) == 0
    tpu = np.load(next(tmp_path.glob("q_bm1684x_int8_asym_tpu_outputs.npz")))["y"]
    ref = run_tflite(str(path), {"x": x})["y"]
    assert float(np.mean(np.abs(np.round((tpu - ref) / s2)) == 0)) == 1.0


def fc_softmax_model(s_fc: float) -> bytes:
    """x -> QUANTIZE -> FULLY_CONNECTED (int8 logits at scale `s_fc`) ->
    SOFTMAX (1/256, -128) -> DEQUANTIZE -> y: a Keras classifier's head."""
    w = RNG.standard_normal((10, 16)).astype(np.float32)
    s_w = np.abs(w).max(axis=1) / 127
    qw = np.round(w / s_w[:, None]).astype(np.int8)
    qb = np.round(RNG.standard_normal(10) / (S_IN * s_w)).astype(np.int32)
    tensors = [
        T("x", [8, 16]),
        T("xq", [8, 16], type=INT8, scale=[S_IN], zero_point=[ZP_IN]),
        T("w", [10, 16], qw, scale=list(s_w), zero_point=[0] * 10),
        T("b", [10], qb, type=INT32, scale=list(S_IN * s_w), zero_point=[0] * 10),
        T("logits", [8, 10], type=INT8, scale=[s_fc], zero_point=[40]),
        T("yq", [8, 10], type=INT8, scale=[1 / 256], zero_point=[-128]),
        T("y", [8, 10]),
    ]
    ops = [Op("QUANTIZE", [0], [1]), Op("FULLY_CONNECTED", [1, 2, 3], [4]),
           Op("SOFTMAX", [4], [5], ("SoftmaxOptions", {"Beta": 1.0})),
           Op("DEQUANTIZE", [5], [6])]  # fmt: skip
    return build(tensors, ops, [0], [6])


def test_prequantized_matmul_before_a_float_op_keeps_its_int8_output(tmp_path):
    """The FC's int8 logits saturate at the model's own output range before
    the softmax (which runs in float): the MatMul requantizes to int8 as the
    model does instead of handing the softmax its unclamped accumulator.
    TOP, in float, does not saturate: no TOP comparison, the bmodel's
    output against LiteRT's."""
    s_fc = 0.03  # logits beyond (127 - 40) * 0.03 = 2.61 saturate
    path = tmp_path / "q.tflite"
    path.write_bytes(fc_softmax_model(s_fc))
    x = RNG.standard_normal((8, 16)).astype(np.float32) * 2
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "q", "--model_def", str(path), "--mlir", str(tmp_path / "q.mlir")]
    assert model_transform.run(argv) == 0
    argv = ["--mlir", str(tmp_path / "q.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--model", str(tmp_path / "q.bmodel")]  # fmt: skip
    assert model_deploy.run(argv) == 0
    argv = ["--input", str(tmp_path / "in.npz"), "--model", str(tmp_path / "q.bmodel"),
            "--output", str(tmp_path / "out.npz")]  # fmt: skip
    assert model_runner.run(argv) == 0
    logits = run_tflite(str(path), {"x": x}, dump_all=True)["logits"]
    assert np.mean(np.isclose(logits, (127 - 40) * s_fc)) > 0.03  # the case at hand
    ref = run_tflite(str(path), {"x": x})["y"]
    lsb = np.abs(np.round((np.load(tmp_path / "out.npz")["y"] - ref) * 256))
    assert np.mean(lsb <= 1) >= 0.99, (float(np.mean(lsb <= 1)), float(lsb.max()))
