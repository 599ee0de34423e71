"""A layer group's [1, C, 1, 1] activations move as GDMA matrices
(passes/native/local/emit.py `move`): one value per channel plane is the
local layout of a [1, C] matrix whose columns lie over the lanes, and the
matrix move writes one DDR run where the tensor move writes each channel
on its own. A global average pool's result stored from its group (INT8,
fewer and more channels than the 64 lanes) equals tpuc's TPU interpreter bit for bit in the vendor
runtime, and the vendor prices the matrix store below the tensor move."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_run_and_cycles, node


def pooled(rng, c: int):
    w = (rng.standard_normal((c, 8, 1, 1)) * 0.3).astype("f4")
    nodes = [node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]), node("Relu", ["r0"], ["r"]),
             node("GlobalAveragePool", ["r"], ["y"])]  # fmt: skip
    return nodes, {"a": rng.standard_normal((1, 8, 6, 6)).astype("f4")}, [("w", w)]


@pytest.mark.parametrize("channels", [40, 200, 1000])
def test_pooled_result_stored_as_a_matrix(tmp_path, monkeypatch, vendor, channels):
    from tpuc.passes.native.local import emit

    kinds = []
    real = emit.move

    def spy(tensor, *args):
        found = real(tensor, *args)
        kinds.append((found[0], tensor.dims))
        return found

    monkeypatch.setattr(emit, "move", spy)
    nodes, feeds, inits = pooled(np.random.default_rng(channels), channels)
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], "INT8", inits)
    matches(run.got, run.expected, "INT8")
    assert ("matrix", (1, channels, 1, 1)) in kinds


def test_matrix_store_is_cheaper(vendor):
    """[1, 1000, 1, 1] f32 (densenet121's result): 5,818 vendor cycles
    against the tensor move's 24,988; [1, 200, 1, 1] i8: 1,163 against 4,997."""
    from tpuc.passes.native.local.emit import L2S, GroupPricer, move
    from tpuc.passes.native.local.plan import LocalTensor, Slice

    with GroupPricer(vendor) as pricer:
        for c, dtype, size in ((1000, "f32", 4), (200, "i8", 1)):
            whole = Slice(0, 1, 0, 1)
            tensor = LocalTensor("y", (1, c, 1, 1), size, (whole,), addrs=(0,))
            matrix = move(tensor, 1 << 32, dtype, 0, L2S, "matrix")
            assert matrix[0] == "matrix"
            plain = ("move", "plain", _tensor_args(tensor, dtype))
            cycles = [pricer.price([("divide",), cmd, ("merge",)]) for cmd in (matrix, plain)]
            assert cycles[0] * 4 < cycles[1], cycles


def _tensor_args(tensor, dtype: str) -> tuple:
    """The tensor_stride_move_gen_cmd the matrix move replaces."""
    from tpuc.passes.native.local.emit import GDMA_FORMATS, L2S, local_strides

    _, c, _, _ = tensor.dims
    local = local_strides(tensor, 1, 1)
    return (0, 0, 1 << 32, 1, c, 1, 1, *local, c, 1, 1, 1, GDMA_FORMATS[dtype], L2S, 0)
