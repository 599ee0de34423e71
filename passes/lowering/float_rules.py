"""F32/F16/BF16 lowering: every TOP op becomes its TPU mirror.

The TPU op computes what the TOP op does, in the mode's float type: operands
are cast to it, weights are rounded copies, and the result is rounded after
the op. Biases of conv/matmul stay f32 (the chip adds them in f32), index
operands and index results stay f32 (f16 holds integers only up to 2048).
"""

from __future__ import annotations

from xdsl.dialects.builtin import f32

from tpuc.dialects import top, tpu
from tpuc.dialects.traits import F32Operands, F32Results
from tpuc.passes.lowering.context import Lowering
from tpuc.passes.lowering.registry import lowering
from tpuc.target.chips import FLOAT_MODES

POOL_MODES = {top.MaxPoolOp: "Max", top.AvgPoolOp: "Avg"}
ACTIVE_MODE_OF = {source: mode for mode, source in tpu.ACTIVE_MODES.items()}


def _indices(op, trait: type[F32Operands] | type[F32Results]) -> tuple[int, ...]:
    """The operand or result indices the op's trait keeps in f32."""
    found = op.get_trait(trait)
    return found.indices if found is not None else ()


def float_operands(lw: Lowering) -> list:
    """Every operand in the op's float type, except the f32 ones."""
    keep = _indices(lw.op, F32Operands)
    values = []
    for i, value in enumerate(lw.op.operands):
        if i not in keep or lw.is_none(i):
            values.append(lw.operand(i))
        elif lw.is_weight(i):
            values.append(lw.float_weight(i, f32))
        else:
            values.append(lw.cast(value, f32))
    return values


def float_results(lw: Lowering) -> list:
    keep = _indices(lw.op, F32Results)
    return [
        lw.result_type(i, f32 if i in keep else lw.float_type) for i in range(len(lw.op.results))
    ]


@lowering(*tpu.MIRRORS, modes=FLOAT_MODES)
def lower_mirror(lw: Lowering):
    cls = tpu.MIRRORS[type(lw.op)]
    return lw.build(cls, float_operands(lw), result_types=float_results(lw))


@lowering(*POOL_MODES, modes=FLOAT_MODES)
def lower_pool(lw: Lowering):
    mode = POOL_MODES[type(lw.op)]
    return lw.build(tpu.Pool2DOp, float_operands(lw), {"pool_mode": mode})


@lowering(*ACTIVE_MODE_OF, modes=FLOAT_MODES)
def lower_active(lw: Lowering):
    mode = ACTIVE_MODE_OF[type(lw.op)]
    return lw.build(tpu.ActiveOp, float_operands(lw), {"mode": mode})


@lowering(top.CastOp, modes=(*FLOAT_MODES, "INT8"))
def lower_value_cast(lw: Lowering):
    """top.Cast converts values (to INT32, BOOL …), kept in f32."""
    source = lw.cast(lw.op.operands[0], f32)
    to = lw.op.value("to") or "F32"
    return lw.build(
        tpu.CastOp,
        [source],
        {"to": to},
        result_types=[lw.result_type(0, f32)],
        copy_attributes=False,
    )


@lowering(top.LRNOp, modes=("F16", "BF16"), family="bm168x")
def lower_lrn_f32(lw: Lowering):
    """LRN in F32 between casts (TPU-MLIR's BM1684X LRNLowering::LoweringF16 is
    LoweringF32: the chip's library has no F16 LRN; its BF16 LRN computes in
    bf16 and drifts from tpuc's f32 arithmetic: cosine 0.99954 on inception_v1)."""
    source = lw.cast(lw.op.operands[0], f32)
    return lw.build(tpu.LRNOp, [source], result_types=[lw.result_type(0, f32)])


@lowering(top.SigmoidOp, modes=("F16", "BF16"), family="bm168x")
def lower_sigmoid_f32(lw: Lowering):
    """Sigmoid in F32 between casts (TPU-MLIR's BM1684X SigmoidLowering::
    LoweringF16/LoweringBF16 are LoweringF32: the library's F16 sigmoid crashes)."""
    source = lw.cast(lw.op.operands[0], f32)
    return lw.build(tpu.SigmoidOp, [source], result_types=[lw.result_type(0, f32)])
