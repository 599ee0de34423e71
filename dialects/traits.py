"""Facts about one op, declared on its class as xDSL traits.

What tpuc knows about an op kind (its nature for calibration and lowering,
which operands are weights or indices, which TOP op a TPU op computes) is
stated once, in the op's `traits_def(...)`, the way xDSL's own dialects
attach `Pure()` or canonicalization patterns. Passes ask the op
(`op.has_trait(ValueMove)`, `type(op).get_trait(WeightAxes)`) instead of
keeping their own tuples of op classes.

Marker traits carry no parameters; parameter traits are frozen dataclasses
(hashable, as xDSL requires), so their mappings are tuples of pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation
from xdsl.pattern_rewriter import RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait, OpTrait


@dataclass(frozen=True)
class ElementwiseUnary(OpTrait):
    """Each output element depends only on the same input element (shape
    kept; INT8 makes the op a lookup table)."""


@dataclass(frozen=True)
class ValueMove(OpTrait):
    """Every output value is one of the input's values, moved (calibration
    copies the input's range; INT8 keeps the input's type)."""


@dataclass(frozen=True)
class InPlaceView(OpTrait):
    """The result is the input reinterpreted: same address, no command."""


@dataclass(frozen=True)
class FusesRelu(OpTrait):
    """The op's kernel applies `do_relu`/`relu_limit` to its output, so a
    trailing ReLU can be folded into it."""


@dataclass(frozen=True)
class Leaf(OpTrait):
    """A graph leaf (input, weight, absent operand): nothing to compute,
    lower or emit a command for."""


@dataclass(frozen=True)
class F32Operands(OpTrait):
    """Operands read in f32 whatever the float mode (biases, indices)."""

    indices: tuple[int, ...]

    def __init__(self, *indices: int):
        object.__setattr__(self, "indices", tuple(indices))


@dataclass(frozen=True)
class F32Results(OpTrait):
    """Results that are indices, kept in f32 whatever the float mode."""

    indices: tuple[int, ...]

    def __init__(self, *indices: int):
        object.__setattr__(self, "indices", tuple(indices))


@dataclass(frozen=True)
class IndexOperands(OpTrait):
    """Operands holding indices or conditions: never fake-quantized."""

    indices: tuple[int, ...]

    def __init__(self, *indices: int):
        object.__setattr__(self, "indices", tuple(indices))


@dataclass(frozen=True)
class WeightAxes(OpTrait):
    """Weight operands INT8 lowering quantizes -> the axis of their scales
    (None: one scale for the whole tensor)."""

    pairs: tuple[tuple[int, int | None], ...]

    def __init__(self, axes: Mapping[int, int | None]):
        object.__setattr__(self, "pairs", tuple(axes.items()))

    @property
    def axes(self) -> dict[int, int | None]:
        return dict(self.pairs)


@dataclass(frozen=True)
class Untuned(OpTrait):
    """The output is an index or a boolean: calibration's tuning skips it
    (a distance on it means nothing)."""


@dataclass(frozen=True)
class Mirrors(OpTrait):
    """A TPU op with the operands, results and attributes of a TOP op: the
    float lowering builds it from that op one to one."""

    source: type[Operation]


@dataclass(frozen=True)
class FloatFormOf(OpTrait):
    """A TPU op that the float lowering builds for these TOP ops (besides
    field-for-field mirrors: a mode attribute picks among them)."""

    sources: tuple[type[Operation], ...]

    def __init__(self, sources: Iterable[type[Operation]]):
        object.__setattr__(self, "sources", tuple(sources))


def with_trait(ops: Iterable[type[Operation]], trait: type[OpTrait]) -> tuple[type[Operation], ...]:
    """The op classes of `ops` that declare `trait`, in the order of `ops`."""
    return tuple(cls for cls in ops if cls.has_trait(trait))


@dataclass(frozen=True)
class HasShapeRule(OpTrait):
    """The op's result shapes follow from its operand shapes by `rule`
    (`rule(op, operand_shapes) -> result_shapes`, see top/shape_rules.py)."""

    rule: Callable[[Any, tuple[tuple[int, ...] | None, ...]], list[tuple[int, ...]]]


@dataclass(frozen=True)
class HasCanonicalizationPatterns(HasCanonicalizationPatternsTrait):
    """The op is rewritten by canonicalization patterns rooted at its class
    (imported from passes/canonicalize when first asked for, as xDSL's own
    dialects import theirs)."""

    def get_patterns(self, op: type[Operation]) -> tuple[RewritePattern, ...]:
        from tpuc.passes.canonicalize import patterns_rooted_at

        return patterns_rooted_at(op)

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return ()  # patterns depend on the op class: see get_patterns
