"""An INT8 classifier fc after a global average pool as a 1x1 convolution.

The small anchors end with global-avg-pool -> Reshape [1, C, 1, 1] ->
[1, C] -> fc. As a MatMul the fc runs globally: the pooled [1, C, 1, 1]
is stored (one byte a channel, ~25 GDMA cycles each) and the fc loads its
weight with N tiny. The same products are a 1x1 convolution of the pooled
[1, C, 1, 1] by the filter [N, C, 1, 1] (the Reshape is then a view: the
pool's output is already the convolution's input), whose per-channel
requant is the fc's per-column one (the merged [1, N, 1, 3] table holds
bias, multiplier and rshift per column, as for a convolution). The
convolution joins the pool's layer group through ops.py's Conv2D rule; a
Reshape [1, N, 1, 1] -> [1, N] after it keeps the fc's name and shape.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.core import element_of, main_function
from tpuc.ir.weights import WeightStore
from tpuc.passes.native.context import dtype_name, quant_of
from tpuc.passes.native.local.plan import NPU_NUM

LOCAL = (tpu.Pool2DOp, tpu.Conv2DOp)  # producers a layer group holds (a pool, a rewritten fc)
LANE_BYTES = 8192
"""At most these filter bytes a lane (ceil(N/64)·C·H·W; smallcnn's fc1 4,096):
the measured fcs; a classifier of 1,000 columns (resnet50's 32 KB a lane)
is left to the global fc until measured."""
CARRIED = ("do_relu", "relu_limit", "multiplier", "rshift", "round_mode", "coeff_merged",
           "subnet_id")  # fmt: skip


def applies(op: Operation) -> bool:
    """An INT8 fc with one row, a weight right operand, the merged table
    and an 8-bit result, whose left operand is a pool's (or a rewritten
    fc's) [1, C, H, W] flattened to [1, C·H·W]."""
    if not isinstance(op, tpu.MatMulOp) or not op.value("coeff_merged"):
        return False
    if op.value("left_transpose") or op.value("hdim_is_batch"):
        return False
    if not all(isinstance(op.operands[i].owner, top.WeightOp) for i in (1, 2)):
        return False
    if quant_of(op.operands[0]) is None or dtype_name(op.results[0]) not in ("i8", "u8"):
        return False
    right_q = quant_of(op.operands[1])
    if right_q is not None and right_q.zero_point:  # the convolution's filter has none
        return False
    reshape = op.operands[0].owner
    if not isinstance(reshape, tpu.ReshapeOp) or not isinstance(reshape.operands[0].owner, LOCAL):
        return False
    shape, right = shape_of(reshape.operands[0]), shape_of(op.operands[1])
    if shape is None or right is None or len(shape) != 4 or shape[0] != 1 or len(right) != 2:
        return False
    k, n = shape[1] * shape[2] * shape[3], shape_of(op.results[0])[-1]
    if -(-n // NPU_NUM) * k > LANE_BYTES:
        return False
    expected = (n, k) if op.value("right_transpose") else (k, n)
    return tuple(shape_of(op.operands[0])) == (1, k) and tuple(right) == expected


def filter_of(op: Operation, store: WeightStore) -> np.ndarray:
    """The fc's int8 weight as weight-reorder's convolution filter
    [1, N, C, H·W] (the flattened K runs over C, then H, then W)."""
    weight = np.asarray(store[op.operands[1].owner.names[0]])
    _, c, h, w = shape_of(op.operands[0].owner.operands[0])
    k, n = c * h * w, shape_of(op.results[0])[1]
    filt = weight.reshape(n, k) if op.value("right_transpose") else weight.reshape(k, n).T
    return np.ascontiguousarray(filt).reshape(1, n, c, h * w)


def rewrite(op: Operation, store: WeightStore) -> None:
    """MatMul -> Conv2D 1x1 on the pooled [1, C, 1, 1], Reshape to [1, N]."""
    reshape = op.operands[0].owner
    pooled = reshape.operands[0]
    n = shape_of(op.results[0])[1]
    name = op.names[0]
    filt = filter_of(op, store)
    weight_type = op.operands[1].type.element_type
    stored = store.add(f"{name}_filter_conv", filt)
    weight = top.WeightOp.make([], stored, result_types=[TensorType(weight_type, filt.shape)])
    attrs = {key: op.value(key) for key in CARRIED}
    kernel = list(shape_of(pooled)[2:])
    attrs.update(kernel_shape=kernel, strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
    conv = tpu.Conv2DOp.make(
        [pooled, weight.results[0], op.operands[2]],
        f"{name}_conv",
        attrs,
        [TensorType(element_of(op.results[0]), [1, n, 1, 1])],
    )
    back = tpu.ReshapeOp.make(
        [conv.results[0]],
        name,
        {"shape": list(shape_of(op.results[0])), "subnet_id": op.value("subnet_id")},
        [op.results[0].type],
    )
    for new in (weight, conv, back):
        Rewriter.insert_op(new, InsertPoint.before(op))
    op.results[0].replace_all_uses_with(back.results[0])
    old_weight = op.operands[1].owner
    Rewriter.erase_op(op)
    if not reshape.results[0].uses:
        Rewriter.erase_op(reshape)
    if not old_weight.results[0].uses:
        Rewriter.erase_op(old_weight)
        store.pop(old_weight.names[0], None)


def fc_as_local_conv(module: ModuleOp, store: WeightStore) -> int:
    """Rewrite every such fc of func @main, in order (an fc after a
    rewritten one then reads a convolution); how many."""
    found = 0
    for op in list(main_function(module).body.block.ops):
        if op.parent is not None and applies(op):
            rewrite(op, store)
            found += 1
    return found


__all__ = ["applies", "fc_as_local_conv"]
