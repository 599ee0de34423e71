"""TPU op -> engine-level commands (docs/isa.md "Engine-level commands").

One rule per op class, registered like the lowering rules; a rule returns
the op's command sequence or None to decline (an op every rule declines is
a compile error naming it). Here: convolutions, matmul, elementwise
arithmetic (integer and float), Concat, pooling, reductions and the table
lookup; the float special functions, conversions and normalizations are in
`engine_rules_unary`, Pad/Gather/Arg in `data_rules`, resizes and
recurrences in `engine_rules_resize_rnn`, CompareConst and INT8 Max/Min in
`engine_select`. Each block holds exactly what the TPU interpreter's
record builder (`tpuc.interp.tpu_ops.params`) reads from the op, so
the simulator rebuilds the same record from the command alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from xdsl.ir import Operation

from tpuc.base.errors import TpucError
from tpuc.base.registry import Registry
from tpuc.dialects import tpu
from tpuc.ir.core import element_of, kind_of
from tpuc.kernels.conv_plan import ConvGeometry
from tpuc.passes.codegen.commands import (
    _filter_reordered,
    _view,
    tensor_record,
)
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_TIU,
    RECORD_BYTES,
    SPACE_LOCAL,
    TENSOR_LANES_AXIS0,
    TENSOR_LANES_AXIS1,
    TENSOR_QUANTIZED,
    Command,
    Header,
    TensorRecord,
)

EngineRule = Callable[[Operation, int], list[Command] | None]
ENGINE_RULES: Registry[type[Operation], EngineRule] = Registry("engine command rules")


def engine_rule(*classes: type[Operation]) -> Callable[[EngineRule], EngineRule]:
    """Register the engine-level command sequence of each op class."""
    return ENGINE_RULES.register(*classes)


def engine_command(
    opcode: int,
    block,
    operands: list[TensorRecord],
    results: list[TensorRecord],
    layer_id: int,
    kind: int = 1,
) -> Command:
    try:
        params = block_codec.encode_block(opcode, block)
    except block_codec.BlockError as exc:  # e.g. an attribute past its field's range
        raise TpucError(
            f"layer {layer_id}: its {isa.ENGINE_NAMES[opcode]} parameters do not fit the "
            f"command block ({exc})"
        ) from None
    header = Header(
        opcode=opcode,
        engine=ENGINE_TIU,
        cmd_id=0,
        wait_id=0,
        n_operands=len(operands),
        n_results=len(results),
        n_param_records=len(params) // RECORD_BYTES,
        layer_id=layer_id,
        kind=kind,
    )
    return Command(header, operands, results, params)


def _ints(op: Operation, key: str, default: list[int] | None = None) -> list[int]:
    value = op.value(key)
    return [int(v) for v in value] if value is not None else list(default or [])


def requant_block(
    op: Operation, axis: int, multiplier=None, rshift=None
) -> isa.RequantBlock | None:
    """The op's epilogue as a per-tensor block (None: per-channel lists or a
    round mode the ISA has no code for: the op declines)."""
    mults = _ints(op, "multiplier", [1]) if multiplier is None else [multiplier]
    shifts = _ints(op, "rshift", [0]) if rshift is None else [rshift]
    if len(mults) != 1 or len(shifts) != 1:
        return None
    mode = op.value("round_mode") or isa.ROUND_MODES[0]
    if mode not in isa.ROUND_MODES:
        return None
    relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit") if relu else None
    return isa.RequantBlock(
        mults[0],
        shifts[0],
        isa.ROUND_MODES.index(mode),
        int(relu),
        axis,
        0,
        math.nan if limit is None else float(limit),
    )


def _int_only(op: Operation) -> bool:
    return kind_of(op) == "int"


def float_epilogue(op: Operation, axis: int) -> isa.RequantBlock:
    """A float command's requant sub-block: multiplier 1, rshift 0, only the
    fused ReLU (`do_relu`, `relu_limit`; NaN: no limit) is read."""
    relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit") if relu else None
    return isa.RequantBlock(1, 0, 0, int(relu), axis, 0, math.nan if limit is None else limit)


def _plain_float(records: list[TensorRecord]) -> bool:
    """No quantized tensor among a float command's records."""
    return not any(r.flags & TENSOR_QUANTIZED for r in records if not r.absent)


# --- convolution -------------------------------------------------------------------------


def _coeff_views(coeff: TensorRecord) -> list[TensorRecord]:
    """The merged (1, oc, 1, 3) i32 [bias, multiplier, rshift] as three
    strided (oc,) views (in local memory: oc over the lanes, axis 0)."""
    oc = coeff.shape[1]
    if coeff.space == SPACE_LOCAL:
        coeff = dataclasses.replace(
            coeff, flags=coeff.flags & ~TENSOR_LANES_AXIS1 | TENSOR_LANES_AXIS0
        )
    return [_view(coeff, (oc,), (3,), k) for k in range(3)]


def _conv_filter(op: Operation) -> tuple[TensorRecord, TensorRecord, list[int]]:
    """Input and filter records (a reordered filter viewed in its logical
    (oc, ic/g, *kernel) shape) and the kernel's spatial sizes."""
    inp, filt = tensor_record(op.operands[0], op), tensor_record(op.operands[1], op)
    if not _filter_reordered(op) or filt.space == SPACE_LOCAL:  # local: loaded in logical shape
        return inp, filt, list(filt.shape[2:])
    kernel = _ints(op, "kernel_shape")
    _, oc, icg, _ = filt.shape
    return inp, _view(filt, (oc, icg, *kernel), (), 0), kernel


def _conv_block(
    op: Operation, kernel: list[int], inp: TensorRecord, out: TensorRecord, epilogue
) -> isa.ConvBlock | None:
    """The TIU_CONV block of a conv or deconv (None: not expressible)."""
    padding = _ints(op, "output_padding")
    if max(len(kernel), len(padding)) > isa.MAX_SPATIAL:
        return None
    geometry = ConvGeometry.of(
        tuple(kernel),
        _ints(op, "strides"),
        _ints(op, "dilations"),
        _ints(op, "pads"),
        int(op.value("group") or 1),
    )
    if len(geometry.begins) != len(kernel) or len(geometry.strides) != len(kernel):
        return None
    depthwise = geometry.group > 1 and geometry.group == inp.shape[1] == out.shape[1]
    mode = (
        isa.CONV_TRANSPOSED
        if isinstance(op, tpu.DeconvOp)
        else isa.CONV_DEPTHWISE
        if depthwise
        else 0
    )
    return isa.ConvBlock(
        mode,
        len(kernel),
        geometry.group,
        geometry.kernel,
        geometry.strides,
        geometry.dilations,
        geometry.begins,
        geometry.ends,
        tuple(padding),
        len(padding),
        epilogue,
    )


@engine_rule(tpu.Conv2DOp, tpu.DeconvOp)
def _conv(op: Operation, layer_id: int) -> list[Command] | None:
    if not _int_only(op):
        return _float_conv(op, layer_id)
    inp, filt, kernel = _conv_filter(op)
    if op.value("coeff_merged"):
        bias, mult, shift = _coeff_views(tensor_record(op.operands[2], op))
        requant = requant_block(op, 1, 1, 0)
        if requant is None:
            return None
        requant = isa.RequantBlock(**{**requant.__dict__, "per_channel": 1})
        operands = [inp, filt, bias, mult, shift]
    else:
        requant = requant_block(op, 1)
        if requant is None:
            return None
        operands = [inp, filt, tensor_record(op.operands[2], op)]
    out = tensor_record(op.results[0], op)
    block = _conv_block(op, kernel, inp, out, requant)
    if block is None:
        return None
    return [engine_command(isa.TIU_CONV, block, operands, [out], layer_id)]


def _float_conv(op: Operation, layer_id: int) -> list[Command] | None:
    """F32/F16/BF16 conv or deconv: one TIU_CONV with `kind` 0 (float32
    arithmetic, then rounding to the result type)."""
    if op.value("coeff_merged") or len(op.operands) != 3:
        return None
    inp, filt, kernel = _conv_filter(op)
    bias, out = tensor_record(op.operands[2], op), tensor_record(op.results[0], op)
    if not _plain_float([inp, filt, bias, out]):
        return None
    block = _conv_block(op, kernel, inp, out, float_epilogue(op, 1))
    if block is None:
        return None
    return [engine_command(isa.TIU_CONV, block, [inp, filt, bias], [out], layer_id, kind=0)]


# --- matmul ---------------------------------------------------------------------------------


@engine_rule(tpu.MatMulOp)
def _matmul(op: Operation, layer_id: int) -> list[Command] | None:
    if len(op.operands) != 3:
        return None
    if not _int_only(op):
        return _float_matmul(op, layer_id)
    operands = [tensor_record(v, op) for v in op.operands]
    if op.value("coeff_merged"):  # per-column values, merged by weight-reorder
        requant = requant_block(op, -1, 1, 0)
        if requant is None:
            return None
        requant = isa.RequantBlock(**{**requant.__dict__, "per_channel": 1})
        operands = [*operands[:2], *_coeff_views(operands[2])]
    else:
        requant = requant_block(op, -1)
    if requant is None:
        return None
    block = isa.MatMulBlock(int(bool(op.value("right_transpose"))), requant)
    out = tensor_record(op.results[0], op)
    return [engine_command(isa.TIU_MATMUL, block, operands, [out], layer_id)]


def _float_matmul(op: Operation, layer_id: int) -> list[Command] | None:
    """F32/F16/BF16 matmul: one TIU_MATMUL with `kind` 0."""
    operands = [tensor_record(v, op) for v in op.operands]
    out = tensor_record(op.results[0], op)
    if op.value("coeff_merged") or not _plain_float([*operands, out]):
        return None
    block = isa.MatMulBlock(int(bool(op.value("right_transpose"))), float_epilogue(op, -1))
    return [engine_command(isa.TIU_MATMUL, block, operands, [out], layer_id, kind=0)]


# --- elementwise ------------------------------------------------------------------------------


@engine_rule(tpu.AddOp, tpu.SubOp, tpu.MulOp)
def _arith(op: Operation, layer_id: int) -> list[Command] | None:
    count = len(op.operands)
    if not _int_only(op):
        return _float_arith(op, layer_id)
    if count > isa.MAX_INPUTS or (isinstance(op, tpu.SubOp) and count != 2):
        return None
    rshifts: tuple[int, ...] = ()
    if isinstance(op, tpu.MulOp):
        code, multipliers = isa.ARITH_MUL, ()
        requant = requant_block(op, 1)
    else:
        code = isa.ARITH_SUB if isinstance(op, tpu.SubOp) else isa.ARITH_ADD
        multipliers = tuple(_ints(op, "multiplier", [1] * count))
        rshift = _ints(op, "rshift", [0])
        if len(multipliers) != count or len(rshift) not in (1, count):
            return None
        # one rshift on the sum, or one per input term (bm168x) and 0 on the sum
        rshifts, shared = (tuple(rshift), 0) if len(rshift) == count > 1 else ((), rshift[0])
        requant = requant_block(op, 1, 1, shared)  # the multipliers are per input
    if requant is None:
        return None
    block = isa.ArithBlock(code, count, multipliers, requant, rshifts)
    operands = [tensor_record(v, op) for v in op.operands]
    out = tensor_record(op.results[0], op)
    return [engine_command(isa.TIU_ARITH, block, operands, [out], layer_id)]


FARITH_KINDS: dict[type, str] = {
    tpu.AddOp: "Add",
    tpu.SubOp: "Sub",
    tpu.MulOp: "Mul",
    tpu.MaxOp: "Max",
    tpu.MinOp: "Min",
    tpu.DivOp: "Div",
    tpu.PowTensorOp: "Pow",
    tpu.AddConstOp: "Add",
    tpu.SubConstOp: "Sub",
    tpu.MulConstOp: "Mul",
    tpu.ScaleOp: "Scale",
}
"""Float TPU op -> its TIU_FARITH op (the TOP kernel's record kind)."""
CONST_OPS = (tpu.AddConstOp, tpu.SubConstOp, tpu.MulConstOp)
NO_FUSED_RELU = (tpu.DivOp, tpu.PowTensorOp)
"""Ops whose TOP kernel record has no fused ReLU (`tpuc.interp.top_ops.elementwise`)."""


@engine_rule(tpu.MaxOp, tpu.MinOp, tpu.DivOp, tpu.PowTensorOp, tpu.ScaleOp, *CONST_OPS)
def _float_arith(op: Operation, layer_id: int) -> list[Command] | None:
    """F32/F16/BF16 elementwise arithmetic: one TIU_FARITH (`kind` 0)."""
    if _int_only(op) or len(op.results) != 1:
        return None
    count = len(op.operands)
    operands = [tensor_record(v, op) for v in op.operands]
    out = tensor_record(op.results[0], op)
    if count > isa.MAX_FARITH_INPUTS or not _plain_float([*operands, out]):
        return None
    if isinstance(op, CONST_OPS):
        if count != 1:
            return None
        reverse = isinstance(op, tpu.SubConstOp) and bool(op.value("is_reverse"))
        form = isa.FARITH_CONST_REVERSED if reverse else isa.FARITH_CONST
        const_val = float(op.value("const_val"))
    else:
        if count < 1 or (isinstance(op, (tpu.SubOp, *NO_FUSED_RELU)) and count != 2):
            return None
        if isinstance(op, tpu.ScaleOp) and count not in (2, 3):
            return None
        form, const_val = isa.FARITH_TENSORS, 0.0
    coeff = tuple(float(c) for c in op.value("coeff") or ()) if isinstance(op, tpu.AddOp) else ()
    if len(coeff) > isa.MAX_INPUTS:  # the block's coeff slots; inputs past it need none
        return None
    relu = not isinstance(op, NO_FUSED_RELU) and bool(op.value("do_relu"))
    limit = op.value("relu_limit") if relu else None
    block = isa.FarithBlock(
        isa.FARITH_OPS.index(FARITH_KINDS[type(op)]),
        count,
        len(coeff),
        form,
        int(relu),
        coeff,
        const_val,
        math.nan if limit is None else float(limit),
    )
    return [engine_command(isa.TIU_FARITH, block, operands, [out], layer_id, kind=0)]


SELECT_OPS: dict[type, int] = {tpu.WhereOp: 3, tpu.PReluOp: 2, tpu.CompareOp: 2}
"""Float ops on TIU_FARITH without coefficients or ReLU, and their input counts."""


@engine_rule(*SELECT_OPS)
def _float_select(op: Operation, layer_id: int) -> list[Command] | None:
    """Float Where, PRelu, Compare: TOP's kernel (ew.where, prelu,
    ew.compare of a mode), rounded to the result type."""
    if _int_only(op) or len(op.operands) != SELECT_OPS[type(op)] or op.value("do_relu"):
        return None
    operands = [tensor_record(v, op) for v in op.operands]
    out = tensor_record(op.results[0], op)
    if not _plain_float([*operands, out]):
        return None
    kind = op.value("mode") if isinstance(op, tpu.CompareOp) else type(op).name.split(".")[-1]
    if kind not in isa.FARITH_OPS:
        return None
    count = len(operands)
    block = isa.FarithBlock(
        isa.FARITH_OPS.index(kind), count, 0, isa.FARITH_TENSORS, 0, (), 0.0, 0.0
    )
    return [engine_command(isa.TIU_FARITH, block, operands, [out], layer_id, kind=0)]


@engine_rule(tpu.ConcatOp)
def _concat(op: Operation, layer_id: int) -> list[Command] | None:
    """One CVT per input, each into its window of the output."""
    if not _int_only(op):
        return _float_concat(op, layer_id)
    count = len(op.operands)
    multipliers = _ints(op, "multiplier", [1] * count)
    rshifts = _ints(op, "rshift", [0] * count)
    if len(multipliers) != count or len(rshifts) != count:
        return None
    whole = tensor_record(op.results[0], op)
    axis = int(op.value("axis")) % len(whole.shape)
    strides = whole.element_strides()
    commands, start = [], 0
    for value, m, r in zip(op.operands, multipliers, rshifts, strict=True):
        part = tensor_record(value, op)
        window = _view(whole, part.shape, strides, start * strides[axis])
        requant = requant_block(op, 1, m, r)
        if requant is None:
            return None
        commands.append(
            engine_command(isa.TIU_CVT, isa.CvtBlock(requant), [part], [window], layer_id)
        )
        start += part.shape[axis]
    return commands


def _float_concat(op: Operation, layer_id: int) -> list[Command] | None:
    """A float Concat with a fused ReLU over one element type (a plain one is
    a DMA copy): one TIU_SFU Relu per input into its window of the output —
    the ReLU is elementwise and rounding is exact on values of that type."""
    if not op.value("do_relu") or op.value("multiplier") or op.value("rshift"):
        return None
    whole = tensor_record(op.results[0], op)
    parts = [tensor_record(v, op) for v in op.operands]
    if not _plain_float([*parts, whole]) or any(p.dtype != whole.dtype for p in parts):
        return None
    limit = op.value("relu_limit")
    block = isa.SfuBlock(
        isa.SFU_FUNCTIONS.index("Relu"), math.nan if limit is None else float(limit), math.nan
    )
    axis = int(op.value("axis")) % len(whole.shape)
    strides = whole.element_strides()
    commands, start = [], 0
    for part in parts:
        window = _view(whole, part.shape, strides, start * strides[axis])
        commands.append(engine_command(isa.TIU_SFU, block, [part], [window], layer_id, kind=0))
        start += part.shape[axis]
    return commands


# --- sums -------------------------------------------------------------------------------------


def _same_quant(a: TensorRecord, b: TensorRecord) -> bool:
    fields = ("dtype", "flags", "scale", "zero_point", "storage_min", "storage_max")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


@engine_rule(tpu.Pool2DOp)
def _pool(op: Operation, layer_id: int) -> list[Command] | None:
    is_int = _int_only(op)
    requant = requant_block(op, 1) if is_int else float_epilogue(op, 1)
    mode = {"Avg": isa.POOL_AVG, "Max": isa.POOL_MAX}.get(op.value("pool_mode"))
    if mode is None or requant is None:
        return None
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if not is_int and not _plain_float([inp, out]):
        return None
    if (
        is_int
        and mode == isa.POOL_MAX
        and not (inp.flags & TENSOR_QUANTIZED and _same_quant(inp, out))
    ):
        return None  # a max moves stored values: one quantized type (else the op's error)
    kernel, strides, pads = _ints(op, "kernel_shape"), _ints(op, "strides"), _ints(op, "pads")
    if max(len(kernel), len(strides)) > isa.MAX_SPATIAL or len(pads) > 2 * isa.MAX_SPATIAL:
        return None
    block = isa.PoolBlock(
        mode,
        int(bool(op.value("ceil_mode"))),
        len(kernel),
        len(strides),
        len(pads),
        tuple(kernel),
        tuple(strides),
        tuple(pads),
        requant,
        0 if is_int else int(bool(op.value("count_include_pad"))),
    )
    return [engine_command(isa.TIU_POOL, block, [inp], [out], layer_id, kind=int(is_int))]


REDUCE_MODES = {"ReduceSum": isa.REDUCE_SUM, "ReduceMean": isa.REDUCE_MEAN}
STORED_REDUCE_MODES = {"ReduceMax": isa.REDUCE_MAX, "ReduceMin": isa.REDUCE_MIN}


@engine_rule(tpu.ReduceOp)
def _reduce(op: Operation, layer_id: int) -> list[Command] | None:
    requant = requant_block(op, 1)
    mode = REDUCE_MODES.get(op.value("mode"))
    axes = _ints(op, "axes")
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if not _int_only(op):  # float: TOP's reduction, rounded to the result type
        name = op.value("mode")
        if name not in isa.REDUCE_FUNCTIONS or len(axes) > isa.MAX_AXES:
            return None
        if not _plain_float([inp, out]) or op.value("do_relu"):
            return None
        code = isa.REDUCE_FUNCTIONS.index(name)
        keep = int(bool(op.value("keepdims")))
        block = isa.ReduceBlock(code, keep, len(axes), tuple(axes), float_epilogue(op, 1))
        return [engine_command(isa.TIU_REDUCE, block, [inp], [out], layer_id, kind=0)]
    stored = STORED_REDUCE_MODES.get(op.value("mode"))
    if stored is not None and _int_only(op) and len(axes) <= isa.MAX_AXES:
        # max/min of stored values (input and result share one element
        # type; the interpreter applies no requant and no ReLU)
        if element_of(op.operands[0]) != element_of(op.results[0]):
            return None
        neutral = isa.RequantBlock(1, 0, 0, 0, 1, 0, math.nan)
        mode, requant = stored, neutral
    if not _int_only(op) or mode is None or requant is None or len(axes) > isa.MAX_AXES:
        return None
    block = isa.ReduceBlock(mode, int(bool(op.value("keepdims"))), len(axes), tuple(axes), requant)
    return [engine_command(isa.TIU_REDUCE, block, [inp], [out], layer_id)]


@engine_rule(tpu.LutOp)
def _lut(op: Operation, layer_id: int) -> list[Command] | None:
    """Quantized input: the lookup on stored values (tpuc.kernels.lut)."""
    if not _int_only(op) or len(op.operands) != 2:
        return None
    x, table = (tensor_record(v, op) for v in op.operands)
    if not x.flags & TENSOR_QUANTIZED or len(table.shape) not in (1, 2):
        return None
    block = isa.LutBlock(int(len(table.shape) == 2))
    out = tensor_record(op.results[0], op)
    return [engine_command(isa.TIU_LUT, block, [x, table], [out], layer_id)]


def engine_commands(op: Operation, layer_id: int) -> list[Command] | None:
    """The op's engine-level commands, or None (no rule, or it declined)."""
    rule = ENGINE_RULES.get(type(op))
    return rule(op, layer_id) if rule is not None else None


# rules of later op families live in their own modules and register into ENGINE_RULES
from tpuc.passes.codegen import (  # noqa: E402, F401
    data_rules,
    engine_rules_resize_rnn,
    engine_rules_unary,
    engine_select,
)
