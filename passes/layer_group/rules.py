"""Per-op local rules: which TPU ops may run on a slice in local memory, and how.

A `LocalRule` is registered per TPU op class (`@local_rule(tpu.Conv2DOp)`),
like the lowering rules. It answers what TPU-MLIR's `LocalGenInterface`
answers (layer-group.md §4, §6):
- `refuse(op)`: None when the op can be a local layer, else why not
  (stride > 15, global pooling …); an op without a rule is always global;
- `axes(op)`: the axes of the 4-D view (`layout.nchw`) it lets the planner
  split: "n", "h", "w" (C is never split: GROUP_NORMAL only);
- `backward(op, axis, out)`: output range (start, size) on `axis` -> the
  range each operand must hold (None: not sliced: weights, absent operands);
- `weight_bytes(op, i, layout)`: per-lane bytes of weight operand i;
- `scratch_bytes(op, out_shape, layout)`: per-lane bytes of the op's own
  work buffer for an output slice of `out_shape`;
- `task(op, out_shape, in_shapes)`: the cycle model's work on that slice.

The base class is an elementwise op with numpy broadcasting: every
activation operand holds the output's range, a size-1 (broadcast) dim holds
[0, 1), weights must not vary along N, H or W.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from tpuc.base.registry import Registry
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.ir.core import element_of, kind_of
from tpuc.passes.address_assign import element_bytes
from tpuc.passes.layer_group.layout import LocalLayout, nchw
from tpuc.target.chips.timing import Unit
from tpuc.target.cost import Task

Range = tuple[int, int]
"""(start, size) of a slice along one axis."""
AXIS_DIM = {"n": 0, "h": 2, "w": 3}
"""Axis name -> dim of the 4-D view."""
MAX_STRIDE = 15  # TPU-MLIR: larger strides only in global codegen


_CACHE: dict[object, object] = {}
"""Memoised facts of values and ops: the search asks for the same ones
thousands of times. `reset_cache` empties it (the pass does, per run)."""


def reset_cache() -> None:
    _CACHE.clear()


def _memo(key: object, compute: Callable[[], object]):
    found = _CACHE.get(key, _CACHE)
    if found is _CACHE:
        found = _CACHE[key] = compute()
    return found


def is_weight(value: SSAValue) -> bool:
    return isinstance(value.owner, top.WeightOp)


def is_absent(value: SSAValue) -> bool:
    return isinstance(value.owner, top.NoneOp)


def dims(value: SSAValue) -> tuple[int, int, int, int]:
    return _memo(("dims", value), lambda: nchw(shape_of(value) or ()))  # type: ignore[return-value]


def ebytes(value: SSAValue) -> int:
    return _memo(("ebytes", value), lambda: element_bytes(element_of(value)) or 4)  # type: ignore[return-value]


def attr(op: Operation, key: str, default=None):
    def compute():
        return op.value(key) if isinstance(op, TensorOp) else None

    value = _memo(("attr", op, key), compute)
    return default if value is None or value == [] else value


def activations(op: Operation) -> tuple[int, ...]:
    """Operand indices that are activations (sliced, moved per slice)."""
    return _memo(  # type: ignore[return-value]
        ("acts", op),
        lambda: tuple(
            i for i, v in enumerate(op.operands) if not is_weight(v) and not is_absent(v)
        ),
    )


def weights(op: Operation) -> list[int]:
    return [i for i, v in enumerate(op.operands) if is_weight(v)]


class LocalRule:
    """An elementwise op with broadcasting (see the module docstring)."""

    unit = Unit.ARITH
    split = "nhw"

    def refuse(self, op: Operation) -> str | None:
        out = dims(op.results[0])
        rank = len(shape_of(op.results[0]) or ())
        for i in activations(op):
            if len(shape_of(op.operands[i]) or ()) != rank:
                return f"operand {i} has another rank than the result"
            if any(d not in (1, o) for d, o in zip(dims(op.operands[i]), out, strict=True)):
                return f"operand {i} is neither the result's shape nor broadcast to it"
        for i in weights(op):
            wn, _, wh, ww = self._weight_view(op, i)
            if (wn, wh, ww) != (1, 1, 1):
                return f"weight operand {i} varies along N, H or W"
        return None

    def _weight_view(self, op: Operation, i: int) -> tuple[int, int, int, int]:
        shape = shape_of(op.operands[i]) or ()
        rank = len(shape_of(op.results[0]) or ())
        if len(shape) < rank:  # numpy broadcasting aligns on the right
            shape = (1,) * (rank - len(shape)) + tuple(shape)
        return nchw(shape)

    def axes(self, op: Operation) -> str:
        return self.split

    def backward(self, op: Operation, axis: str, out: Range) -> list[Range | None]:
        d = AXIS_DIM[axis]
        full = dims(op.results[0])[d]
        found: list[Range | None] = []
        for i, value in enumerate(op.operands):
            if i not in activations(op):
                found.append(None)
            elif dims(value)[d] == 1 and full != 1:
                found.append((0, 1))
            else:
                found.append(out)
        return found

    def weight_bytes(self, op: Operation, i: int, layout: LocalLayout) -> int:
        value = op.operands[i]
        n_elems = math.prod(shape_of(value) or ())
        channels = self._weight_view(op, i)[1]
        if channels > 1 and channels == dims(op.results[0])[1]:
            return layout.channel_bytes(n_elems, channels, ebytes(value))
        return layout.broadcast_bytes(n_elems, ebytes(value))

    def scratch_bytes(self, op: Operation, out: Sequence[int], layout: LocalLayout) -> int:
        if self.unit is Unit.SFU:  # a float work copy of the slice
            return layout.lane_bytes(out, 4)
        return 0

    def task(self, op: Operation, out: Sequence[int], ins: Sequence[Sequence[int] | None]) -> Task:
        widest = max(ebytes(v) for v in (*op.results, *[op.operands[i] for i in activations(op)]))
        return Task(self.unit, math.prod(out), widest)


RULES: Registry[type, LocalRule] = Registry("layer-group local rule")


def local_rule(*classes: type, priority: int = 0) -> Callable[[type[LocalRule]], type[LocalRule]]:
    """Class decorator: register one instance of the rule for each op class."""

    def register(rule: type[LocalRule]) -> type[LocalRule]:
        instance = rule()
        for cls in classes:
            RULES.add(cls, instance, priority)
        return rule

    return register


def rule_of(op: Operation) -> LocalRule | None:
    _load_rules()
    return RULES.get(type(op))


def why_global(op: Operation) -> str | None:
    """None when `op` can be a local layer, else the reason it stays global."""
    return _memo(("global", op), lambda: _why_global(op))  # type: ignore[return-value]


def _why_global(op: Operation) -> str | None:
    rule = rule_of(op)
    if rule is None:
        return f"{op.name} has no local rule"
    if len(op.results) != 1 or not isinstance(op.results[0].type, TensorType):
        return "not one ranked tensor result"
    if (
        any(not isinstance(v.type, TensorType) for v in op.operands if not is_absent(v))
        or element_bytes(element_of(op.results[0])) is None
    ):
        return "an operand or the result is not a ranked tensor of known element type"
    return rule.refuse(op)


def int_kind(op: Operation) -> bool:
    return kind_of(op) == "int"


def _load_rules() -> None:
    from tpuc.passes.layer_group import rules_ops  # noqa: F401  (registers the rules)


__all__ = [
    "AXIS_DIM",
    "RULES",
    "LocalRule",
    "Range",
    "activations",
    "dims",
    "ebytes",
    "is_weight",
    "local_rule",
    "reset_cache",
    "rule_of",
    "why_global",
]
