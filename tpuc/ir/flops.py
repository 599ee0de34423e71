"""Floating-point operation counts of TOP ops, for `module.FLOPs`.

Conv, Deconv and MatMul count 2 per multiply-accumulate plus one per output
element for a bias and one for a fused ReLU (TPU-MLIR's rule, which gives
the book's 109,428,480 for its TpuLang conv example). Pooling counts its
window per output element. Ops that only move or reinterpret data count 0;
every other op counts 1 per output element.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp, NoneType, TensorType
from xdsl.ir import Operation, SSAValue

from tpuc.base.registry import Registry
from tpuc.dialects import top

FlopsRule = Callable[[Operation], int]
_RULES: Registry[type[Operation], FlopsRule] = Registry("FLOPs rules")


def flops_rule(*classes: type[Operation], priority: int = 0) -> Callable[[FlopsRule], FlopsRule]:
    """Register the FLOPs count of each op class (default: elementwise)."""
    return _RULES.register(*classes, priority=priority)


def _elements(value: SSAValue) -> int:
    t = value.type
    return math.prod(t.get_shape()) if isinstance(t, TensorType) else 0


def _dims(value: SSAValue) -> tuple[int, ...]:
    t = value.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def _extras(op: Operation) -> int:
    """Per-output-element additions: bias and fused ReLU."""
    has_bias = not isinstance(op.operands[2].type, NoneType) if len(op.operands) > 2 else False
    return int(has_bias) + int(bool(op.value("do_relu")))


@flops_rule(
    top.InputOp,
    top.WeightOp,
    top.NoneOp,
    top.ReshapeOp,
    top.FlattenOp,
    top.SqueezeOp,
    top.UnsqueezeOp,
    top.PermuteOp,
    top.SliceOp,
    top.ConcatOp,
    top.SplitOp,
    top.PadOp,
    top.TileOp,
    top.ExpandOp,
    top.GatherOp,
    top.Depth2SpaceOp,
)
def _no_flops(op: Operation) -> int:
    return 0


@flops_rule(top.ConvOp)
def _conv(op: Operation) -> int:
    filter_dims = _dims(op.operands[1])
    macs_per_output = math.prod(filter_dims[1:])  # ic/group × kernel
    return _elements(op.results[0]) * (2 * macs_per_output + _extras(op))


@flops_rule(top.DeconvOp)
def _deconv(op: Operation) -> int:
    filter_dims = _dims(op.operands[1])  # [ic, oc/group, *kernel]
    macs_per_input = math.prod(filter_dims[1:])
    return _elements(op.operands[0]) * 2 * macs_per_input + _elements(op.results[0]) * _extras(op)


@flops_rule(top.MatMulOp)
def _matmul(op: Operation) -> int:
    k = _dims(op.operands[0])[-1:] or (1,)
    return _elements(op.results[0]) * (2 * k[0] + _extras(op))


@flops_rule(top.MaxPoolOp, top.AvgPoolOp)
def _pool(op: Operation) -> int:
    window = math.prod(op.value("kernel_shape") or [1])
    return _elements(op.results[0]) * (window + int(bool(op.value("do_relu"))))


def _elementwise(op: Operation) -> int:
    return sum(_elements(r) for r in op.results)


def op_flops(op: Operation) -> int:
    rule = _RULES.get(type(op), _elementwise)
    return rule(op)


def module_flops(module: ModuleOp) -> int:
    """Total FLOPs of the TOP ops in `module` (shapes must be inferred)."""
    return sum(op_flops(op) for op in module.walk() if op.dialect_name() == "top")
