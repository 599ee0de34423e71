"""The f32 local depthwise kernel of local/half_depthwise.py leaves
buffer_local_addr alone: the rule gives it no scratch and points the field
at 0, which is safe only if `backend_api_conv_local` (f32, depthwise,
no requant) never writes there (the f32 active kernel did: wide.py's
active_buffer). Pointed at a tensor still alive (the depthwise input x,
which the Add reads after the convolution), the group's output stays bit
for bit tpuc's interpreter, unsliced and in H slices (checked 2026-11-27
also for 144x112x112 5x5 BF16, several slices)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node


def _aimed_at_the_input(hd):
    """half_depthwise's command with buffer_local_addr at the live input's slot."""

    def command(op, ctx, plan, step):
        param, info = hd.conv_geometry(op, plan, step)
        param.spec.common.has_bias = int(hd.has_bias(op))
        param.spec.buffer_local_addr = plan.tensors[op.operands[0]].addr_at(step)
        aimed.append(param.spec.buffer_local_addr)
        weights = [hd.coeff_spec(plan, op, i, k) for i, k in enumerate(hd.dw_coeffs(op, ctx))]
        return hd.widened(op, plan, step, lambda a, b: [
            hd.local_command(op, "backend_api_conv_local", param, info, [a, *weights], [b])
        ])  # fmt: skip

    aimed: list[int] = []
    return hd.LocalRule(hd.CONV.backward, hd.dw_coeffs, hd.wide_buffer, command), aimed


@pytest.mark.parametrize(("mode", "c", "side"), [("F16", 64, 28), ("BF16", 32, 56)])
def test_f32_depthwise_kernel_writes_no_buffer(tmp_path, monkeypatch, mode, c, side):
    import tpuc.passes.native.local.half_depthwise as hd

    rule, aimed = _aimed_at_the_input(hd)
    monkeypatch.setattr(hd, "HALF_DW", rule)
    rng = np.random.default_rng(0)
    inits = [("w1", (rng.standard_normal((c, c, 1, 1)) * 0.1).astype("f4")),
             ("w", (rng.standard_normal((c, 1, 3, 3)) * 0.3).astype("f4")),
             ("b", (rng.standard_normal((c,)) * 0.3).astype("f4"))]  # fmt: skip
    nodes = [
        node("Conv", ["a", "w1"], ["x"], kernel_shape=[1, 1]),
        node("Conv", ["x", "w", "b"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=c),
        node("Add", ["d", "x"], ["y"]),
    ]
    feeds = {"a": rng.standard_normal((1, c, side, side)).astype("f4")}
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], mode, inits)
    assert aimed, "the depthwise convolution ran in no layer group"
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
