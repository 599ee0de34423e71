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

from tpuc.base.registry import Registry
from tpuc.target.chips import Chip

if TYPE_CHECKING:
    from tpuc.passes.lowering.context import Lowering

Rule = Callable[["Lowering"], Operation | Sequence[Operation]]
"""Builds the TPU op(s) for `lowering.op`; the last op's results replace
the TOP op's results."""

Applies = Callable[[Operation], bool]
"""Whether a rule can lower this particular op (e.g. AvgPool only when every
window has the same size); when it cannot, INT8 falls back to float."""

RULES: Registry[tuple[type[Operation], str, str | None], tuple[Rule, Applies | None]] = Registry(
    "lowering rules"
)


def lowering(
    *op_classes: type[Operation],
    modes: Iterable[str],
    family: str | None = None,
    when: Applies | None = None,
    priority: int = 0,
) -> Callable[[Rule], Rule]:
    """Register `fn` as the rule of each op class in each mode (for every
    chip, or only for chips of `family`), for the ops `when` accepts."""
    modes = tuple(modes)

    def register(fn: Rule) -> Rule:
        for cls in op_classes:
            for mode in modes:
                RULES.add((cls, mode, family), (fn, when), priority)
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


def registered_rule(
    op_class: type[Operation], mode: str, chip: Chip
) -> tuple[Rule, Applies | None] | None:
    """The chip family's (rule, when) for ops of `op_class` if there is one,
    else the generic one; None when neither is registered."""
    _load_rules()
    for family in (chip.family, None):
        entry = RULES.get((op_class, mode, family))
        if entry is not None:
            return entry
    return None


def find_rule(op: Operation, mode: str, chip: Chip) -> Rule | None:
    """The rule `registered_rule` finds for `op`, None when there is none
    or its `when` does not accept `op`."""
    entry = registered_rule(type(op), mode, chip)
    if entry is None:
        return None
    rule, applies = entry
    return rule if applies is None or applies(op) else None


def fallback_mode(mode: str, chip: Chip) -> str | None:
    """The mode an op runs in when it has no rule for `mode`: INT8 falls
    back to the chip's float mode; float modes have no fallback."""
    return chip.float_fallback if mode == "INT8" else None


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
    "tpuc.passes.lowering.concat_scale",
]
"""Modules whose import registers lowering rules."""

__all__ = [
    "PREPARERS",
    "RULES",
    "Rule",
    "fallback_mode",
    "find_rule",
    "lowering",
    "preparer",
    "registered_rule",
]
