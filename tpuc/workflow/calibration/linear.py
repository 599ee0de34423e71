"""The linear layers the calibration techniques edit: Conv and MatMul whose
weight is a `top.Weight` only they read.

Weight equalization, bias correction, SmoothQuant and learned rounding all
change the same things (a layer's weight along its output or input
channels, its bias) and need the same question answered (what is the
layer's output without its bias and fused ReLU). `Linear` answers it once
for both op kinds, so each technique is written in channels, not in axes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top
from tpuc.interp.top_ops.conv import conv_attrs
from tpuc.ir.weights import WeightStore, create_weight
from tpuc.kernels import float_conv as lib
from tpuc.kernels.requant import NO_RELU


def users(value: SSAValue) -> list[Operation]:
    """The ops reading `value` (each once, in no particular order)."""
    return list(dict.fromkeys(use.operation for use in value.uses))


def own_weight(op: Operation, index: int) -> top.WeightOp | None:
    """Operand `index` of `op` if it is a `top.Weight` nothing else reads."""
    if index >= len(op.operands):
        return None
    owner = op.operands[index].owner
    if not isinstance(owner, top.WeightOp) or "value" in owner.attributes:
        return None
    return owner if users(owner.output) == [op] else None


@dataclass
class Linear:
    """A Conv (filter [oc, ic/group, *k]) or MatMul (2-D right weight) and
    its weights in `store`. Channels: `out` are the output's (conv axis 1,
    matmul last axis), `in` are the input's."""

    op: top.ConvOp | top.MatMulOp
    store: WeightStore

    @classmethod
    def of(cls, op: Operation, store: WeightStore) -> Linear | None:
        """The layer if `op` is one the techniques can edit, else None."""
        if isinstance(op, top.ConvOp) and own_weight(op, 1) is not None:
            return cls(op, store)
        weight = own_weight(op, 1) if isinstance(op, top.MatMulOp) else None
        if weight is not None and store[weight.tensor_name.data].ndim == 2:
            return cls(op, store)
        return None

    @property
    def name(self) -> str:
        return self.op.names[0]

    @property
    def is_conv(self) -> bool:
        return isinstance(self.op, top.ConvOp)

    @property
    def group(self) -> int:
        return int(self.op.value("group") or 1) if self.is_conv else 1

    # --- weights -----------------------------------------------------------------------

    @property
    def weight_name(self) -> str:
        return self.op.operands[1].owner.tensor_name.data

    @property
    def weight(self) -> np.ndarray:
        return np.asarray(self.store[self.weight_name], np.float32)

    @weight.setter
    def weight(self, array: np.ndarray) -> None:
        self.store[self.weight_name] = np.ascontiguousarray(array, np.float32)

    def out_major(self) -> np.ndarray:
        """The weight as [out channels, rest] (a view for conv, a copy for matmul)."""
        w = self.weight
        if self.is_conv:
            return w.reshape(w.shape[0], -1)
        return w if self.op.value("right_transpose") else w.T

    def set_out_major(self, rows: np.ndarray) -> None:
        w = self.weight
        if self.is_conv:
            self.weight = rows.reshape(w.shape)
        else:
            self.weight = rows if self.op.value("right_transpose") else rows.T

    def row_scales(self) -> np.ndarray:
        """Each output channel's INT8 weight step as lowering picks it
        (passes/lowering/int8_conv.py: per output channel for Conv and
        for a MatMul's weight columns alike)."""
        from tpuc.passes.lowering.int8_conv import weight_scales

        return weight_scales(np.abs(self.out_major()).max(axis=1).astype(np.float64))

    def quantized_rows(self) -> np.ndarray:
        """The weight as [out, rest] after INT8 rounding, back in float."""
        from tpuc.passes.lowering.int8_conv import quantize_weight

        scales = self.row_scales()[:, None]
        return quantize_weight(self.out_major(), scales).astype(np.float64) * scales

    def quantized_weight(self) -> np.ndarray:
        """The weight in its own layout after INT8 rounding, back in float."""
        rows = self.quantized_rows().astype(np.float32)
        if self.is_conv:
            return rows.reshape(self.weight.shape)
        return rows if self.op.value("right_transpose") else np.ascontiguousarray(rows.T)

    @property
    def out_channels(self) -> int:
        return self.out_major().shape[0]

    @property
    def bias(self) -> np.ndarray | None:
        owner = own_weight(self.op, 2)
        return None if owner is None else np.asarray(self.store[owner.tensor_name.data])

    @property
    def has_bias_slot(self) -> bool:
        """A bias the technique may write: its own weight, or none yet."""
        return own_weight(self.op, 2) is not None or isinstance(
            self.op.operands[2].owner, top.NoneOp
        )

    def set_bias(self, bias: np.ndarray) -> None:
        """Write the bias, creating its weight when the layer had none."""
        bias = np.ascontiguousarray(bias, np.float32).reshape(self.out_channels)
        owner = own_weight(self.op, 2)
        if owner is not None:
            self.store[owner.tensor_name.data] = bias
            return
        new = create_weight(self.op, f"{self.name}_bias", bias)
        self.op.parent_block().insert_op_before(new, self.op)
        self.op.operands[2] = new.output

    # --- input-channel slices (what equalization scales) -------------------------------

    def in_slices(self, channels: int) -> list[tuple]:
        """For each input channel c, the index into the weight that reads it."""
        w = self.weight
        if not self.is_conv:
            transposed = self.op.value("right_transpose")
            return [(slice(None), c) if transposed else (c,) for c in range(channels)]
        per_group_in, per_group_out = w.shape[1], w.shape[0] // self.group
        slices = []
        for c in range(channels):
            g, local = divmod(c, per_group_in)
            slices.append((slice(g * per_group_out, (g + 1) * per_group_out), local))
        return slices

    def in_channels(self) -> int:
        w = self.weight
        if self.is_conv:
            return w.shape[1] * self.group
        return w.shape[0] if not self.op.value("right_transpose") else w.shape[1]

    # --- the linear part ---------------------------------------------------------------

    def linear(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """The layer's output for input `x` and `weight`, without bias or ReLU."""
        if self.is_conv:
            attrs = replace(conv_attrs(self.op), relu=NO_RELU)
            return lib.conv(attrs, x, weight)
        return lib.matmul(lib.MatMul(bool(self.op.value("right_transpose"))), x, weight)

    def channel_mean(self, y: np.ndarray) -> np.ndarray:
        """Mean of an output over everything but its channels."""
        y = np.asarray(y, np.float64)
        if self.is_conv:
            return y.mean(axis=tuple(i for i in range(y.ndim) if i != 1))
        return y.reshape(-1, y.shape[-1]).mean(axis=0)


def linears(ops: Iterable[Operation], store: WeightStore) -> list[Linear]:
    """Every editable layer among `ops`, in order."""
    return [layer for op in ops if (layer := Linear.of(op, store)) is not None]
