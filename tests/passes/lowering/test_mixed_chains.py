"""Boundaries of a mixed INT8/F16 module inside elementwise chains and at a
Concat (passes/lowering/convert.py `_elementwise_follow`,
passes/lowering/concat_scale.py): a boundary must not round a tensor that
neither pure mode rounds. The reference is onnxruntime.

- A decomposed HardSwish x·clip(x+3, 0, 6)·(1/6) is one INT8 table with one
  rounding at its end. With only its last op in F16 (what a qtable or the
  automatic mixed precision names) the rest became a table of its own
  rounding the gate to an INT8 grid before the F16 multiply; now the chain
  follows its float end.
- A float layer read only by an INT8 Concat casts straight to the Concat's
  scale (one rounding), as an INT8 producer requantizes to it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from tests.passes.lowering.test_int8_eltwise_accuracy import (
    initializer,
    node,
    onnx_model,
    value_info,
)
from tests.passes.lowering.test_mixed_boundaries import element_types, lowered

SHAPE = (1, 2, 4, 5)


def inputs() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [{"x": rng.uniform(-4.0, 4.0, SHAPE).astype(np.float32)} for _ in range(4)]


def hardswish(tmp_path) -> str:
    """x → Add(3) 'a' → Clip(0, 6) 'c' → Mul(x, c) 'm' → Mul(1/6) 'y'."""
    nodes = [
        node("Add", ["x", "three"], ["a"], name="a"),
        node("Clip", ["a", "lo", "hi"], ["c"], name="c"),
        node("Mul", ["x", "c"], ["m"], name="m"),
        node("Mul", ["m", "sixth"], ["y"], name="y"),
    ]
    inits = [initializer(k, np.float32(v)) for k, v in
             {"three": 3.0, "lo": 0.0, "hi": 6.0, "sixth": 1 / 6}.items()]  # fmt: skip
    return onnx_model(
        tmp_path / "hswish.onnx", nodes, [value_info("x", SHAPE)], [value_info("y", SHAPE)], inits
    )


def reference(path: str, x: dict) -> np.ndarray:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, x)[0]


def test_chain_follows_its_float_end(tmp_path):
    from tpuc.interp.tpu_interpreter import run_tpu

    path = hardswish(tmp_path)
    module, store = lowered(tmp_path, path, {"y": "F16"}, inputs())
    types = element_types(module)
    assert not any(t.startswith("!quant") for t in types.values()), types
    x = inputs()[0]
    got, want = run_tpu(module, store, x)["y"], reference(path, x)
    # F16 throughout: a few F16 roundings of values up to 4 (2^-11 relative);
    # the gate on an INT8 grid (6/127 a step) would move y by up to 4·(3/127)/6 = 0.016
    assert np.abs(got - want).max() < 6e-3


def test_qtable_keeps_a_chain_member_in_int8(tmp_path):
    """The qtable wins: a member it names INT8 stays quantized, so the
    gate is rounded to its grid (up to 4·(3/127)/6 on y)."""
    from tpuc.interp.tpu_interpreter import run_tpu

    path = hardswish(tmp_path)
    module, store = lowered(tmp_path, path, {"y": "F16", "m": "F16", "c": "INT8"}, inputs())
    types = element_types(module)
    assert any(t.startswith("!quant") for n, t in types.items() if n.startswith("c")), types
    x = inputs()[0]
    error = np.abs(run_tpu(module, store, x)["y"] - reference(path, x)).max()
    assert 6e-3 < error <= 4 * (3 / 127) / 6 * 1.05


def concat(tmp_path) -> str:
    """x → Mul(2) 'q', x → Mul(0.5) 'p', Concat(q, p) 'c' along channels."""
    nodes = [
        node("Mul", ["x", "two"], ["q"], name="q"),
        node("Mul", ["x", "half"], ["p"], name="p"),
        node("Concat", ["q", "p"], ["c"], name="c", axis=1),
    ]
    inits = [initializer("two", np.float32(2.0)), initializer("half", np.float32(0.5))]
    out = (1, 4, *SHAPE[2:])
    return onnx_model(
        tmp_path / "concat.onnx", nodes, [value_info("x", SHAPE)], [value_info("c", out)], inits
    )


def test_float_input_casts_to_the_concat_scale(tmp_path):
    """p in F16 (its own range ¼ of the Concat's): its Cast to int8 takes
    the Concat's scale, so p's half of the output is within half a Concat
    step of onnxruntime's (two roundings could reach a step and a quarter /2)."""
    from tpuc.dialects import tpu
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.core import element_of
    from tpuc.ir.qparams import QuantParams

    path = concat(tmp_path)
    module, store = lowered(tmp_path, path, {"p": "F16"}, inputs())
    ops = list(next(iter(module.ops)).body.block.ops)
    (cast,) = [
        op for op in ops if isinstance(op, tpu.CastOp) and op.operands[0].owner.names[0] == "p"
    ]
    (cat,) = [op for op in ops if isinstance(op, tpu.ConcatOp)]
    step = QuantParams.of(element_of(cat.results[0])).scale
    assert QuantParams.of(element_of(cast.results[0])).scale == step
    x = inputs()[0]
    got, want = run_tpu(module, store, x)["c"], reference(path, x)
    assert np.abs(got - want)[:, 2:].max() <= step / 2 * 1.01
