"""The onnxruntime path of the TOP interpreter (runs of ops as onnxruntime
sessions) against its numpy kernels, op by op: each case must be taken by
an export rule (not left to numpy) and agree with the kernel to float32
rounding; declined variants still run (in numpy); every tensor stays
observable, and bytes do not depend on the thread count."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import rand
from xdsl.parser import Parser

from tpuc.base.errors import TpucError
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.ir.context import make_context


def t(shape) -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + "xf32>"


def module_text(op: str, ins: list[tuple], weights: dict, out: tuple) -> str:
    """`func @main` of activations `ins`, weights, one op named "y" and a
    Relu after it (so the op's result is also read inside the run)."""
    args = ", ".join(f"%a{i}: {t(s)}" for i, s in enumerate(ins))
    lines = [
        f'%i{i} = "top.Input"(%a{i}) {{name = "x{i}"}} : ({t(s)}) -> {t(s)}'
        for i, s in enumerate(ins)
    ]
    for name, shape in weights.items():
        if shape is None:
            lines.append(f'%{name} = "top.None"() : () -> none')
        else:
            lines.append(f'%{name} = "top.Weight"() {{name = "{name}"}} : () -> {t(shape)}')
    lines.append(op)
    lines.append(f'%z = "top.Relu"(%y) {{name = "z"}} : ({t(out)}) -> {t(out)}')
    body = "\n    ".join(lines)
    return (
        f"builtin.module {{\n  func.func @main({args}) -> ({t(out)}, {t(out)}) {{\n    {body}\n"
        f"    func.return %y, %z : {t(out)}, {t(out)}\n  }}\n}}"
    )


X = (1, 4, 6, 6)


def case(op: str, attrs: str, ins: list, weights: dict, out: tuple):
    """One op named "y" on the inputs and weights (in that operand order)."""
    operands = [f"%i{i}" for i in range(len(ins))] + [f"%{w}" for w in weights]
    types = [t(s) for s in ins] + ["none" if s is None else t(s) for s in weights.values()]
    extra = ", " + attrs if attrs else ""
    args, arg_types = ", ".join(operands), ", ".join(types)
    text = f'%y = "top.{op}"({args}) {{name = "y"{extra}}} : ({arg_types}) -> {t(out)}'
    return text, ins, weights, out


RELU = "do_relu = true, relu_limit = -1.0 : f64"
CONV = "dilations = [1, 1], group = 1 : i64"
POOL = "ceil_mode = false"
CASES = {
    "conv-relu6-group": case(
        "Conv",
        "kernel_shape = [3, 3], strides = [2, 1], pads = [1, 0, 1, 2], dilations = [1, 2], "
        "group = 2 : i64, do_relu = true, relu_limit = 6.0 : f64",
        [X],
        {"w": (6, 2, 3, 3), "b": (6,)},
        (1, 6, 3, 4),
    ),
    "conv-no-bias": case(
        "Conv",
        f"kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], {CONV}",
        [X],
        {"w": (5, 4, 1, 1), "b": None},
        (1, 5, 6, 6),
    ),
    "deconv": case(
        "Deconv",
        f"kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], {CONV}, "
        "output_padding = [1, 1]",
        [X],
        {"w": (4, 3, 3, 3), "b": (3,)},
        (1, 3, 12, 12),
    ),
    "matmul-bias-relu": case("MatMul", RELU, [(2, 8)], {"w": (8, 5), "b": (5,)}, (2, 5)),
    "matmul-right-transpose": case(
        "MatMul", "right_transpose = true", [(3, 2, 8), (3, 5, 8)], {"b": None}, (3, 2, 5)
    ),
    "add-coeff-relu": case("Add", f"coeff = [1.0, -0.5, 2.0], {RELU}", [X, X, (1, 4, 1, 1)], {}, X),
    "mul": case("Mul", "", [X, X], {}, X),
    "max": case("Max", "", [X, X], {}, X),
    "sub-relu": case("Sub", "do_relu = true, relu_limit = 0.5 : f64", [X, X], {}, X),
    "div": case("Div", "", [X, X], {}, X),
    "addconst-relu6": case(
        "AddConst", "const_val = 3.0 : f64, do_relu = true, relu_limit = 6.0 : f64", [X], {}, X
    ),
    "subconst-reverse": case("SubConst", "const_val = 0.25 : f64, is_reverse = true", [X], {}, X),
    "mulconst": case("MulConst", "const_val = 0.125 : f64", [X], {}, X),
    "scale-relu": case("Scale", RELU, [X], {"s": (1, 4, 1, 1), "b": (1, 4, 1, 1)}, X),
    "scale-no-bias": case("Scale", "", [X], {"s": (4, 1, 1), "b": None}, X),
    "relu6": case("Relu", "relu_limit = 6.0 : f64", [X], {}, X),
    "leakyrelu": case("LeakyRelu", "alpha = 0.1 : f64", [X], {}, X),
    "hardsigmoid": case("HardSigmoid", "alpha = 0.2 : f64, beta = 0.5 : f64", [X], {}, X),
    "hardswish": case("HardSwish", "", [X], {}, X),
    "sigmoid": case("Sigmoid", "", [X], {}, X),
    "silu": case("SiLU", "", [X], {}, X),
    "tanh": case("Tanh", "", [X], {}, X),
    "abs": case("Abs", "", [X], {}, X),
    "maxpool-pads": case(
        "MaxPool",
        f"kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], {POOL}",
        [X],
        {},
        (1, 4, 3, 3),
    ),
    "avgpool-exclude-pad": case(
        "AvgPool",
        f"kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], {POOL}, "
        "count_include_pad = false",
        [X],
        {},
        X,
    ),
    "avgpool-include-pad": case(
        "AvgPool",
        f"kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], {POOL}, "
        "count_include_pad = true",
        [X],
        {},
        (1, 4, 4, 4),
    ),
    "avgpool-global": case(
        "AvgPool",
        f"kernel_shape = [6, 6], strides = [1, 1], pads = [0, 0, 0, 0], {POOL}, "
        "count_include_pad = false",
        [X],
        {},
        (1, 4, 1, 1),
    ),
    "concat-relu": case("Concat", f"axis = 1 : i64, {RELU}", [X, (1, 2, 6, 6)], {}, (1, 6, 6, 6)),
    "reshape": case("Reshape", "shape = [1, -1]", [X], {}, (1, 144)),
    "permute": case("Permute", "order = [0, 2, 3, 1]", [X], {}, (1, 6, 6, 4)),
    "slice": case(
        "Slice",
        "offset = [0, 1, 0, -5], ends = [1, 4, 6, 6], steps = [1, 2, 3, 1]",
        [X],
        {},
        (1, 2, 2, 5),
    ),
    "upsample": case("Upsample", "scale_h = 2 : i64, scale_w = 3 : i64", [X], {}, (1, 4, 12, 18)),
    "softmax": case("Softmax", "axis = 1 : i64, log = false", [X], {}, X),
    "logsoftmax": case("Softmax", "axis = -1 : i64, log = true", [X], {}, X),
    "layernorm": case(
        "LayerNorm",
        "axis = 2 : i64, eps = 1.0e-5 : f64, normalized_shape = [6, 6]",
        [X],
        {"g": (6, 6), "b": (6, 6)},
        X,
    ),
    "lrn": case(
        "LRN",
        "size = 3 : i64, alpha = 1.0e-2 : f64, beta = 0.75 : f64, bias = 1.0 : f64",
        [X],
        {},
        X,
    ),
}


def build(case: str):
    op, ins, weights, out = CASES[case]
    module = Parser(make_context(), module_text(op, ins, weights, out)).parse_module()
    rng = np.random.default_rng(7)
    store = {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in weights.items() if s}
    inputs = {f"x{i}": rand(*s) for i, s in enumerate(ins)}
    if case == "div":
        inputs["x1"] = np.where(np.abs(inputs["x1"]) < 0.1, 0.5, inputs["x1"]).astype(np.float32)
    return module, store, inputs


@pytest.mark.parametrize("case", sorted(CASES))
def test_native_rule_matches_the_numpy_kernel(case):
    module, store, inputs = build(case)
    native = TopInterpreter(module, native=True)
    got = native.run(store, inputs, dump_all=True)
    covered = {native.steps[i].names[0] for i in native._native.covered}
    assert "y" in covered, f"{case}: the export rule declined it"
    want = TopInterpreter(module, native=False).run(store, inputs, dump_all=True)
    for name in ("y", "z"):
        assert got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=case)
    outputs = native.run(store, inputs)  # nothing observed: only the outputs leave ORT
    np.testing.assert_allclose(outputs["z"], want["z"], rtol=2e-5, atol=2e-6)


POW = case("Pow", "exponent = 2.5 : f64", [X], {}, X)


def test_declined_variants_run_in_numpy():
    """Pow is not exported (onnxruntime's float32 pow differs in the last
    bits): it runs in numpy, the Relu after it natively, results unchanged."""
    CASES["pow"] = POW
    try:
        module, store, inputs = build("pow")
    finally:
        del CASES["pow"]
    inputs["x0"] = np.abs(inputs["x0"])
    native = TopInterpreter(module, native=True)
    got = native.run(store, inputs, dump_all=True)
    names = {native.steps[i].names[0] for i in native._native.covered}
    assert names == {"z"}
    want = TopInterpreter(module, native=False).run(store, inputs, dump_all=True)
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_allclose(got["z"], want["z"], rtol=1e-6)


def test_every_tensor_is_observed_once_and_in_order():
    module, store, inputs = build("conv-relu6-group")
    seen = []
    TopInterpreter(module, native=True).run(
        store,
        inputs,
        observe=lambda step, args, res: seen.append(
            (step.names[0], [a.shape for a in args if a is not None], [r.shape for r in res])
        ),
    )
    assert [s[0] for s in seen] == ["x0", "y", "z"]
    assert seen[1][1][0] == X and seen[2][1] == [(1, 6, 3, 4)]


def test_native_bytes_do_not_depend_on_threads():
    module, store, inputs = build("conv-relu6-group")
    results = [
        TopInterpreter(module, threads=n, native=True).run(store, inputs, dump_all=True)
        for n in (1, 2, 4)
    ]
    for other in results[1:]:
        for name in results[0]:
            assert results[0][name].tobytes() == other[name].tobytes()


def test_new_weights_make_new_sessions():
    module, store, inputs = build("conv-no-bias")
    interp = TopInterpreter(module, native=True)
    first = interp.run(store, inputs)["y"]
    doubled = {k: v * 2 for k, v in store.items()}
    np.testing.assert_allclose(interp.run(doubled, inputs)["y"], 2 * first, rtol=1e-5, atol=1e-6)


def test_the_kernels_are_the_default():
    module, store, inputs = build("conv-no-bias")
    interp = TopInterpreter(module)
    interp.run(store, inputs)
    assert interp._native is None


def test_a_missing_weight_is_named():
    module, store, inputs = build("conv-no-bias")
    with pytest.raises(TpucError, match="weight 'w' is missing"):
        TopInterpreter(module, native=True).run({}, inputs)


def test_a_run_onnxruntime_will_not_load_falls_back_to_numpy(monkeypatch, capsys):
    """An export rule writing a graph onnxruntime refuses costs speed, not
    results: the run is dropped, its ops run in numpy, the reason is kept
    and said once, on one line naming the ops."""
    from tpuc.interp import top_interpreter
    from tpuc.interp.ort import graph, rules

    monkeypatch.setattr(top_interpreter, "_WARNED", set())

    def broken(p, g, ins, outs):
        g.node("NoSuchOp", [ins[0].name], [outs[0]])
        return True

    monkeypatch.setitem(graph.EXPORTS, rules.activation.unary, broken)
    module, store, inputs = build("conv-relu6-group")
    interp = TopInterpreter(module, native=True)
    got = interp.run(store, inputs, dump_all=True)
    want = TopInterpreter(module, native=False).run(store, inputs, dump_all=True)
    for name in ("y", "z"):
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6)
    assert interp._native.covered == set()
    assert "NoSuchOp" in interp._native.failures[0]
    assert interp.run(store, inputs)["z"].shape == want["z"].shape  # and again, in numpy
    TopInterpreter(module, native=True).run(store, inputs)  # a new interpreter: same reason
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: onnxruntime would not load the run of 2 ops from 'y'")
    assert "(top.Conv, top.Relu)" in lines[0] and "tpuc's kernels" in lines[0]
