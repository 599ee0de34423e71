"""Boundaries of a mixed INT8/F16 module: data movement the qtable does not
name runs in its neighbours' float mode, so a tensor passed between float
layers through a reshape is never rounded to an INT8 grid.

The case is PP-PicoDet's score head in three ops: x·(−0.5) in F16, a
Sigmoid in F16 whose scores stay below 0.2, a Reshape. Calibration fixes
the Sigmoid's threshold at 1.0 (u8 steps of 1/255), so an INT8 Reshape
would move every score by up to 1/510; in F16 the error is F16 rounding
(2^-11 of the value). The reference is onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.passes.lowering.test_int8_eltwise_accuracy import (
    initializer,
    node,
    onnx_model,
    value_info,
)
from tpuc.passes.registry import get_pass

SHAPE = (1, 2, 4, 5)


def head(tmp_path: Path) -> str:
    """x → Mul(−0.5) → Sigmoid → Reshape(1, 40), named `m`, `s`, `r`."""
    nodes = [
        node("Mul", ["x", "k"], ["m"], name="m"),
        node("Sigmoid", ["m"], ["s"], name="s"),
        node("Reshape", ["s", "shape"], ["r"], name="r"),
    ]
    inits = [initializer("k", np.float32(-0.5)), initializer("shape", np.array([1, 40]))]
    return onnx_model(
        tmp_path / "head.onnx", nodes, [value_info("x", SHAPE)], [value_info("r", (1, 40))], inits
    )


def samples() -> list[dict[str, np.ndarray]]:
    """Inputs in [3, 6]: scores sigmoid(−0.5·x) between 0.047 and 0.18."""
    rng = np.random.default_rng(7)
    return [{"x": rng.uniform(3.0, 6.0, SHAPE).astype(np.float32)} for _ in range(4)]


def lowered(tmp_path: Path, onnx_path: str, qtable: dict[str, str], inputs=None):
    """Calibrate (max) on `inputs` (default `samples()`), lower to INT8 on
    bm1684x with `qtable`."""
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.ir.qtable import format_qtable
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.calibration.calibrate import Calibration, write_table
    from tpuc.workflow.calibration.dataset import Sample

    module, weights = convert_onnx(onnx_path, "head")
    store = WeightStore(weights)
    attach_weights(module, store)
    paths = []
    for i, sample in enumerate(inputs or samples()):
        paths.append(tmp_path / f"s{i}.npz")
        np.savez(paths[-1], **sample)
    cali = Calibration(module, store, str(tmp_path / "head.mlir"), warn=lambda _: None)
    entries = cali.run([Sample((str(p),)) for p in paths], [], "max")
    table, qfile = tmp_path / "cali_table", tmp_path / "qtable"
    write_table(
        table, entries, mlir=tmp_path / "head.mlir", method="max", bins=2048,
        samples=4, tune_num=0, generated="test",
    )  # fmt: skip
    qfile.write_text(format_qtable(qtable))
    for p in [
        get_pass("import-calibration-table")(file=str(table)),
        get_pass("processor-assign")(chip="bm1684x", mode="INT8"),
        get_pass("convert-top-to-tpu")(qtable=str(qfile)),
    ]:
        p.apply(None, module)
    return module, store


def element_types(module) -> dict[str, str]:
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.core import element_of

    ops = next(iter(module.ops)).body.block.ops
    return {op.names[0]: str(element_of(op.results[0])) for op in ops if isinstance(op, TensorOp)}


def test_reshape_between_float_layers_keeps_their_precision(tmp_path):
    import onnxruntime as ort

    from tpuc.interp.tpu_interpreter import run_tpu

    path = head(tmp_path)
    module, store = lowered(tmp_path, path, {"m": "F16", "s": "F16"})
    x = samples()[0]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (want,) = session.run(None, x)
    got = run_tpu(module, store, x)["r"]
    assert float(want.max()) < 0.2
    # F16 rounding of x·(−0.5) (2^-11 relative, ≤ 0.0015 absolute), through the
    # sigmoid's slope (≤ 0.25) and the F16 score: far below an u8 step of 1/255
    assert np.abs(got - want).max() < 6e-4
    assert np.abs(got - want).max() < 1 / 510 / 3
    types = element_types(module)
    assert types["r_f16"] == "f16"  # the Reshape, renamed before its f32 Cast
    assert not any(t.startswith("!quant") for t in types.values())


def test_reshape_named_in_the_qtable_keeps_its_mode(tmp_path):
    """The qtable wins: a Reshape it names INT8 rounds the scores to the
    Sigmoid's u8 grid."""
    from tpuc.dialects.base import TensorOp
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.core import element_of
    from tpuc.ir.qparams import QuantParams

    path = head(tmp_path)
    module, store = lowered(tmp_path, path, {"m": "F16", "s": "F16", "r": "INT8"})
    ops = next(iter(module.ops)).body.block.ops
    (reshape,) = [op for op in ops if isinstance(op, TensorOp) and op.names[0] == "r_u8"]
    scale = QuantParams.of(element_of(reshape.results[0])).scale
    steps = run_tpu(module, store, samples()[0])["r"] / scale
    assert np.allclose(steps, np.round(steps), atol=1e-3)
