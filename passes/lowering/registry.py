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

from tpuc.chips import Chip

if TYPE_CHECKING:
    from tpuc.passes.lowering.context import Lowering

Rule = Callable[["Lowering"], Operation | Sequence[Operation]]
"""Builds the TPU op(s) for `lowering.op`; the last op's results replace
the TOP op's results."""

Applies = Callable[[Operation], bool]
"""Whether a rule can lower this particular op (e.g. AvgPool only when every
window has the same size); when it cannot, INT8 falls back to float."""

RULES: dict[tuple[type[Operation], str, str | None], tuple[Rule, Applies | None]] = {}


def lowering(
    *op_classes: type[Operation],
    modes: Iterable[str],
    family: str | None = None,
    when: Applies | None = None,
) -> Callable[[Rule], Rule]:
    """Register `fn` as the rule of each op class in each mode (for every
    chip, or only for chips of `family`), for the ops `when` accepts."""
    modes = tuple(modes)

    def register(fn: Rule) -> Rule:
        for cls in op_classes:
            for mode in modes:
                RULES[(cls, mode, family)] = (fn, when)
        return fn

    return register


Preparer = Callable[..., None]
PREPARERS: list[Preparer] = []
"""Called as fn(state, ops, modes) before any op of a function is lowered,
for rules that must read the TOP graph as a whole (it changes as ops are
lowered)."""


def preparer(fn: Preparer) -> Preparer:
    PREPARERS.append(fn)
    return fn


def find_rule(op: Operation, mode: str, chip: Chip) -> Rule | None:
    """The chip family's rule if there is one, else the generic rule; None
    when neither exists or accepts `op`."""
    _load_rules()
    for family in (chip.family, None):
        entry = RULES.get((type(op), mode, family))
        if entry is None:
            continue
        rule, applies = entry
        return rule if applies is None or applies(op) else None
    return None


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


RULE_MODULES = [
    "tpuc.passes.lowering.float_rules",
    "tpuc.passes.lowering.int8_conv",
    "tpuc.passes.lowering.int8_eltwise",
    "tpuc.passes.lowering.int8_lut",
    "tpuc.passes.lowering.int8_data",
    "tpuc.passes.lowering.int8_region",
]
"""Modules whose import registers lowering rules."""

__all__ = ["PREPARERS", "RULES", "Rule", "find_rule", "lowering", "preparer"]
