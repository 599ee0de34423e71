"""A symmetric INT8 depthwise 1x1 convolution (a per-channel scale, as
ppocr_det's BatchNorm after its transposed convolution) over at most 64
channels runs as the ordinary 1x1 convolution with a diagonal filter, as
TPU-MLIR writes it: bit for bit against tpuc's TPU interpreter, and the
vendor's cycles those of the dense convolution."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_run_and_cycles, node
from onnx import numpy_helper


def scale_model(rng, channels: int, dense: bool):
    d = rng.uniform(0.5, 1.5, channels).astype("f4")
    b = rng.standard_normal(channels).astype("f4")
    if dense:
        w = np.zeros((channels, channels, 1, 1), "f4")
        w[np.arange(channels), np.arange(channels), 0, 0] = d
    else:
        w = d.reshape(channels, 1, 1, 1)
    group = 1 if dense else channels
    nodes = [
        node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1], group=group),
        node("Relu", ["c"], ["y"]),
    ]
    return nodes, [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]


@pytest.mark.parametrize(("channels", "side"), [(16, 144), (24, 96)])
def test_depthwise_pointwise_as_dense(tmp_path, channels, side):
    """Never dearer than the dense form: above one 16 KiB bank per lane
    (144x144) it is the dense form (depthwise kernel before: whole net
    117,224 against 86,672), at 96x96 the depthwise kernel (cheaper there)."""
    x = np.random.default_rng(0).standard_normal((1, channels, side, side)).astype("f4")
    cycles = {}
    for dense in (False, True):
        nodes, inits = scale_model(np.random.default_rng(channels), channels, dense)
        work = tmp_path / str(dense)
        work.mkdir()
        run, cycles[dense] = native_run_and_cycles(
            work, nodes, {"x": x}, ["y"], "INT8", inits, all_global=True
        )
        matches(run.got, run.expected, "INT8")
    assert cycles[False] <= cycles[True]
    if side == 144:
        assert cycles[False] == cycles[True]
