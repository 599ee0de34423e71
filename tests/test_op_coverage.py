"""Every TOP op is wired through the whole compiler, so none can be half-added.

`missing_rules(op_classes)` asks, for each op class, the same lookups the
pipeline uses: shape-infer's rule, the TOP interpreter's float kernel, the
lowering rule of each mode on each chip (or the mode it falls back to), the
TPU interpreter's kernel of the TPU op that is its float form, and a
codegen rule for that TPU op.
"""

from __future__ import annotations

from xdsl.irdl import irdl_op_definition, operand_def, result_def

from tpuc.dialects import top, tpu
from tpuc.dialects.base import AnyTensor, TensorOp
from tpuc.dialects.traits import Leaf
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.tpu_interpreter import tpu_kernel_of
from tpuc.passes.codegen.commands import has_commands
from tpuc.passes.lowering.registry import fallback_mode, registered_rule
from tpuc.passes.shape_infer import shape_rule_of
from tpuc.target.chips import CHIPS


def _lowering_gaps(cls: type) -> list[str]:
    """'lowering <mode> on <chip>' for each mode a chip runs that has no
    rule for `cls`, directly or through the mode's fallback."""
    gaps = []
    for chip in CHIPS.values():
        for mode in chip.modes:
            fallback = fallback_mode(mode, chip)
            if registered_rule(cls, mode, chip) is not None:
                continue
            if fallback is not None and registered_rule(cls, fallback, chip) is not None:
                continue
            gaps.append(f"lowering {mode} on {chip.name}")
    return gaps


def _tpu_gaps(cls: type) -> list[str]:
    """A TPU form (float lowering's target) with a float kernel and an opcode."""
    forms = tpu.float_forms(cls)
    if not forms:
        return ["TPU kernel (no TPU op is its float form)", "codegen (no TPU op)"]
    gaps = []
    for form in forms:
        if tpu_kernel_of(form, "float") is None:
            gaps.append(f"TPU kernel of {form.name}")
        if not has_commands(form):
            gaps.append(f"codegen of {form.name}")
    return gaps


def missing_rules(op_classes: list[type]) -> dict[str, list[str]]:
    """Op name -> the rules it lacks (ops lacking none are left out). Leaves
    (inputs, weights, absent operands) compute nothing and are skipped."""
    missing = {}
    for cls in op_classes:
        if cls.has_trait(Leaf):
            continue
        gaps = []
        if shape_rule_of(cls) is None:
            gaps.append("shape rule")
        if cls not in KERNELS:
            gaps.append("float kernel")
        gaps += _lowering_gaps(cls)
        gaps += _tpu_gaps(cls)
        if gaps:
            missing[cls.name] = gaps
    return missing


def test_every_top_op_is_covered():
    assert missing_rules(top.TOP_OPS) == {}


def test_every_tpu_op_has_a_kernel_and_a_command():
    for cls in tpu.TPU_OPS:
        kernels = [k for k in ("float", "int") if tpu_kernel_of(cls, k) is not None]
        assert kernels, f"{cls.name} has no TPU kernel"
        assert has_commands(cls), f"{cls.name} has no command rule"


@irdl_op_definition
class ThrowawayOp(TensorOp):
    """A TOP op added to the dialect file and nowhere else."""

    name = "top.Throwaway"
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)


def test_a_half_added_op_is_reported_missing_every_rule():
    gaps = missing_rules([top.ReluOp, ThrowawayOp])
    assert list(gaps) == ["top.Throwaway"]
    found = gaps["top.Throwaway"]
    assert found[:2] == ["shape rule", "float kernel"]
    lowering = [g for g in found if g.startswith("lowering ")]
    assert len(lowering) == sum(len(chip.modes) for chip in CHIPS.values())
    assert any(g.startswith("TPU kernel") for g in found)
    assert any(g.startswith("codegen") for g in found)


def test_ops_declare_the_canonicalization_patterns_rooted_at_them():
    """A pattern whose root class lacks the trait would never be tried."""
    from tpuc.dialects.traits import HasCanonicalizationPatterns
    from tpuc.passes.canonicalize import top_patterns

    roots = {root for pattern in top_patterns() for root in pattern.roots}
    declared = {
        cls for cls in (*top.TOP_OPS, *tpu.TPU_OPS) if cls.has_trait(HasCanonicalizationPatterns)
    }
    assert {c.name for c in roots} == {c.name for c in declared}
