"""LSTM and GRU kernels against onnxruntime (ONNX layouts, both directions)."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort

from tpuc.dialects import top

SEQ, BATCH, INPUT, HIDDEN = 5, 2, 3, 4


def ort_layout0(op_type, inputs, attrs, n_outputs, batch_first):
    """ORT refuses layout=1: run layout 0 on transposed tensors and
    transpose the outputs back (X/Y: batch<->seq; states: batch<->dirs)."""
    if not batch_first:
        return run_ort(op_type, inputs, attrs, n_outputs=n_outputs, opset=14)
    x, *rest = inputs
    swapped = [np.swapaxes(x, 0, 1)] + [
        None if a is None else (np.swapaxes(a, 0, 1) if i >= 4 else a)
        for i, a in enumerate(rest, 1)
    ]
    outs = run_ort(op_type, swapped, dict(attrs, layout=0), n_outputs=n_outputs, opset=14)
    return [outs[0].transpose(2, 0, 1, 3)] + [np.swapaxes(o, 0, 1) for o in outs[1:]]


def operands(gates: int, dirs: int, with_bias: bool, with_state: bool, batch_first: bool):
    x = rand(BATCH, SEQ, INPUT) if batch_first else rand(SEQ, BATCH, INPUT)
    w = rand(dirs, gates * HIDDEN, INPUT)
    r = rand(dirs, gates * HIDDEN, HIDDEN)
    b = rand(dirs, 2 * gates * HIDDEN) if with_bias else None
    state_shape = (BATCH, dirs, HIDDEN) if batch_first else (dirs, BATCH, HIDDEN)
    h0 = rand(*state_shape) if with_state else None
    c0 = rand(*state_shape) if with_state else None
    return x, w, r, b, h0, c0


CASES = [
    # direction, bias, initial states, batch_first (ONNX layout=1)
    ("forward", True, False, False),
    ("bidirectional", True, True, False),
    ("bidirectional", False, False, False),
    ("bidirectional", True, True, True),
]


@pytest.mark.parametrize("direction,with_bias,with_state,batch_first", CASES)
def test_lstm(direction, with_bias, with_state, batch_first):
    dirs = 2 if direction == "bidirectional" else 1
    x, w, r, b, h0, c0 = operands(4, dirs, with_bias, with_state, batch_first)
    attrs = dict(hidden_size=HIDDEN, direction=direction, layout=int(batch_first))
    refs = ort_layout0("LSTM", [x, w, r, b, None, h0, c0], attrs, 3, batch_first)
    top_attrs = dict(hidden_size=HIDDEN, bidirectional=dirs == 2, batch_first=batch_first)
    ours = run_kernel(top.LSTMOp, [x, w, r, b, h0, c0], top_attrs, result_names=["y", "h", "c"])
    for o, ref in zip(ours, refs, strict=True):
        assert_close(o, ref)


def test_lstm_reverse_half_of_bidirectional():
    x, w, r, b, h0, c0 = operands(4, 2, True, True, False)
    refs = run_ort(
        "LSTM",
        [x, w[1:], r[1:], b[1:], None, h0[1:], c0[1:]],
        dict(hidden_size=HIDDEN, direction="reverse"),
        n_outputs=3,
        opset=14,
    )
    y, yh, yc = run_kernel(
        top.LSTMOp,
        [x, w, r, b, h0, c0],
        dict(hidden_size=HIDDEN, bidirectional=True),
        result_names=["y", "h", "c"],
    )
    assert_close(y[:, 1:], refs[0])
    assert_close(yh[1:], refs[1])
    assert_close(yc[1:], refs[2])


@pytest.mark.parametrize("direction,with_bias,with_state,batch_first", CASES)
@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru(direction, with_bias, with_state, batch_first, linear_before_reset):
    dirs = 2 if direction == "bidirectional" else 1
    x, w, r, b, h0, _ = operands(3, dirs, with_bias, with_state, batch_first)
    attrs = dict(
        hidden_size=HIDDEN,
        direction=direction,
        layout=int(batch_first),
        linear_before_reset=linear_before_reset,
    )
    refs = ort_layout0("GRU", [x, w, r, b, None, h0], attrs, 2, batch_first)
    top_attrs = dict(
        hidden_size=HIDDEN,
        bidirectional=dirs == 2,
        batch_first=batch_first,
        linear_before_reset=bool(linear_before_reset),
    )
    ours = run_kernel(top.GRUOp, [x, w, r, b, h0], top_attrs, result_names=["y", "h"])
    for o, ref in zip(ours, refs, strict=True):
        assert_close(o, ref)
