"""LSTM and GRU, kept in ONNX's weight layouts and gate orders (see
`top.RecurrentOp`). A reverse-only layer runs forward over the time-reversed
sequence (a Gather with reversed indices) and reverses its Y back.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from tpuc.dialects import top
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.registry import converter
from tpuc.frontends.onnx.shape_ops import input_shape

DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def _check_supported(cv: OnnxConverter, node: NodeProto, seq: int) -> None:
    attrs = cv.attrs(node)
    acts = attrs.get("activations")
    defaults = DEFAULT_ACTIVATIONS[node.op_type]
    if acts and [a.lower() for a in acts] != [
        a.lower() for a in defaults * (len(acts) // len(defaults))
    ]:
        raise cv.error(node, f"activations {acts} are not supported")
    if "clip" in attrs:
        raise cv.error(node, "cell clipping is not supported")
    if attrs.get("input_forget", 0):
        raise cv.error(node, "input_forget is not supported")
    lens = node.input[4] if len(node.input) > 4 else ""
    if lens:
        c = cv.const(lens)
        if c is None or np.any(c != seq):
            raise cv.error(node, "sequence_lens is not supported (only full-length sequences)")
    peephole = node.input[7] if len(node.input) > 7 else ""
    if peephole and not (cv.is_const(peephole) and not np.any(cv.const(peephole))):
        raise cv.error(node, "peephole weights are not supported")


def _result_shapes(batch_first: bool, seq: int, batch: int, dirs: int, hidden: int, count: int):
    y = [batch, seq, dirs, hidden] if batch_first else [seq, dirs, batch, hidden]
    state = [batch, dirs, hidden] if batch_first else [dirs, batch, hidden]
    return [y] + [state] * (count - 1)


@converter("LSTM", "GRU")
def convert_recurrent(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    shape = input_shape(cv, node)
    batch_first = bool(attrs.get("layout", 0))
    seq_axis = 1 if batch_first else 0
    seq, batch = shape[seq_axis], shape[1 - seq_axis]
    _check_supported(cv, node, seq)
    direction = attrs.get("direction", "forward")
    hidden = int(attrs["hidden_size"])
    dirs = 2 if direction == "bidirectional" else 1
    is_lstm = node.op_type == "LSTM"
    count = 3 if is_lstm else 2
    outputs = (list(node.output) + [""] * count)[:count]
    base = next((o for o in outputs if o), node.name)
    names = [o or cv.unique_name(f"{base}_{i}") for i, o in enumerate(outputs)]
    if direction == "reverse" and outputs[0]:
        names[0] = cv.unique_name(f"{outputs[0]}_reversed")
    shapes = _result_shapes(batch_first, seq, batch, dirs, hidden, count)
    x = cv.value(node.input[0])
    if direction == "reverse":
        x = _reverse(cv, x, seq_axis, seq, f"{base}_input_reversed", list(shape))
    optional = [node.input[i] if len(node.input) > i else "" for i in (3, 5, 6)]
    operands = [x, cv.value(node.input[1]), cv.value(node.input[2])]
    operands += [cv.value(optional[0]), cv.value(optional[1])]
    params: dict = {"hidden_size": hidden, "bidirectional": dirs == 2, "batch_first": batch_first}
    if is_lstm:
        operands.append(cv.value(optional[2]))
        cls: type = top.LSTMOp
    else:
        params["linear_before_reset"] = bool(attrs.get("linear_before_reset", 0))
        cls = top.GRUOp
    op = cv.emit(cls, operands, names[0], params, result_names=names, shapes=shapes)
    if direction == "reverse" and outputs[0]:
        y = _reverse(cv, op.results[0], seq_axis, seq, outputs[0], shapes[0], temp=False)
        cv.bind(outputs[0], y)


def _reverse(cv: OnnxConverter, value, axis: int, length: int, name: str, shape, temp: bool = True):
    """`value` with its `axis` (of size `length`) in reverse order."""
    index = cv.weight(f"{name}_index", np.arange(length - 1, -1, -1, dtype=np.float32))
    if temp:
        return cv.emit_temp(top.GatherOp, [value, index], name, {"axis": axis}, shape)
    return cv.emit(top.GatherOp, [value, index], name, {"axis": axis}, shape=shape).results[0]
