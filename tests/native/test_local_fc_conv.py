"""An INT8 fc after a global average pool runs as a 1x1 convolution in the
pool's layer group (passes/native/local/fc_conv.py): bit for bit against
tpuc's TPU interpreter in the vendor runtime, the fc's per-column requant as
the convolution's per-channel one, over fewer and more channels than the 64
lanes, from a Gemm (transposed weight) and a MatMul, in fewer vendor cycles
than the global fc (the pooled store and the fc's weight load go)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_run_and_cycles, node

from tpuc.dialects import tpu


def pooled_fc(rng, c: int, n: int, gemm: bool):
    w = (rng.standard_normal((c, 8, 1, 1)) * 0.3).astype("f4")
    fc = (rng.standard_normal((n, c) if gemm else (c, n)) * 0.2).astype("f4")
    bias = (rng.standard_normal(n) * 0.1).astype("f4")
    nodes = [node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]), node("Relu", ["r0"], ["r"]),
             node("GlobalAveragePool", ["r"], ["p"]), node("Flatten", ["p"], ["f"])]  # fmt: skip
    inits = [("w", w), ("fc", fc)]
    if gemm:
        nodes.append(node("Gemm", ["f", "fc", "b"], ["y"], transB=1))
        inits.append(("b", bias))
    else:
        nodes.append(node("MatMul", ["f", "fc"], ["y"]))
    return nodes, {"a": rng.standard_normal((1, 8, 6, 6)).astype("f4")}, inits


def pooled_mlp(rng):
    """smallcnn's head: a 2x2 max pool's [1, 16, 3, 3] flattened, an fc
    with relu (a 3x3 convolution), a second fc reading the first."""
    w = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype("f4")
    fc1 = (rng.standard_normal((24, 144)) * 0.1).astype("f4")
    fc2 = (rng.standard_normal((7, 24)) * 0.2).astype("f4")
    bias = (rng.standard_normal(24) * 0.1).astype("f4")
    nodes = [node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]), node("Relu", ["r0"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("Gemm", ["f", "fc1", "b"], ["h0"], transB=1),
             node("Relu", ["h0"], ["h"]), node("Gemm", ["h", "fc2"], ["y"], transB=1)]  # fmt: skip
    inits = [("w", w), ("fc1", fc1), ("b", bias), ("fc2", fc2)]
    return nodes, {"a": rng.standard_normal((1, 8, 6, 6)).astype("f4")}, inits


def grouped_convs(module) -> list[str]:
    convs = [op for op in module.walk() if isinstance(op, tpu.Conv2DOp)]
    return [op.names[0] for op in convs if isinstance(op.parent_op(), tpu.GroupOp)]


CASES = {"32x10": (32, 10, True), "200x2": (200, 2, True), "96x5-matmul": (96, 5, False),
         "mlp": None, "32x10-asym": (32, 10, True)}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_pooled_fc_local_conv(tmp_path, monkeypatch, case, vendor):
    from tpuc.passes.native.local import fc_conv

    rng = np.random.default_rng(len(case))
    nodes, feeds, inits = pooled_fc(rng, *CASES[case]) if CASES[case] else pooled_mlp(rng)
    fcs = 2 if CASES[case] is None else 1
    asym = case.endswith("asym")  # zero points: in the bias, as for any convolution; it stays
    # global there (the group search keeps the asymmetric pool and conv apart), as cheap
    compiled = {}
    real = fc_conv.fc_as_local_conv

    def spy(module, store):
        compiled["module"], compiled["count"] = module, real(module, store)
        return compiled["count"]

    monkeypatch.setattr(fc_conv, "fc_as_local_conv", spy)
    for sub in ("conv", "fc"):
        (tmp_path / sub).mkdir()
    run, cycles = native_run_and_cycles(tmp_path / "conv", nodes, feeds, ["y"], "INT8", inits,
                                        asymmetric=asym)  # fmt: skip
    assert "tpu.MatMul" in run.kinds and compiled["count"] == fcs
    grouped = [name for name in grouped_convs(compiled["module"]) if name.endswith("_conv")]
    assert len(grouped) == (0 if asym else fcs)
    matches(run.got, run.expected, "INT8")
    monkeypatch.setattr(fc_conv, "fc_as_local_conv", lambda module, store: 0)
    _, before = native_run_and_cycles(tmp_path / "fc", nodes, feeds, ["y"], "INT8", inits,
                                      asymmetric=asym)  # fmt: skip
    assert cycles <= before if asym else cycles < before
