"""Lowering rules, keyed by TOP op class, quantize mode and chip family.

A rule turns one TOP op into TPU op(s) through the `Lowering` view it is
given (operands already in the op's precision, result types, weights).
Rules registered for a chip family ("cv18xx") override the generic ones, so
a chip adds only the rules whose arithmetic differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from xdsl.ir import Operation

from tpuc.chips import FLOAT_MODES, Chip

if TYPE_CHECKING:
    from tpuc.passes.lowering.context import Lowering

Rule = Callable[["Lowering"], Operation | Sequence[Operation]]
"""Builds the TPU op(s) for `lowering.op`; the last op's results replace
the TOP op's results."""

RULES: dict[tuple[type[Operation], str, str | None], Rule] = {}


def lowering(
    *op_classes: type[Operation], modes: Iterable[str], family: str | None = None
) -> Callable[[Rule], Rule]:
    """Register `fn` as the rule of each op class in each mode (for every
    chip, or only for chips of `family`)."""
    modes = tuple(modes)

    def register(fn: Rule) -> Rule:
        for cls in op_classes:
            for mode in modes:
                RULES[(cls, mode, family)] = fn
        return fn

    return register


def find_rule(op_class: type[Operation], mode: str, chip: Chip) -> Rule | None:
    """The chip family's rule if there is one, else the generic rule."""
    _load_rules()
    return RULES.get((op_class, mode, chip.family)) or RULES.get((op_class, mode, None))


def has_int8_rule(op_class: type[Operation], chip: Chip) -> bool:
    return find_rule(op_class, "INT8", chip) is not None


_LOADED = False


def _load_rules() -> None:
    """Import the rule modules (they register themselves) on first use."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib

    for module in RULE_MODULES:
        importlib.import_module(module)


RULE_MODULES = ["tpuc.passes.lowering.float_rules"]
"""Modules whose import registers lowering rules."""

__all__ = ["FLOAT_MODES", "RULES", "Rule", "find_rule", "has_int8_rule", "lowering"]
