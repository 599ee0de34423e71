"""Local rules: one per groupable op class, as TPU-MLIR's
`Interfaces/BM1684X/<Op>.cpp` hold `codegen_local_bm1684x`,
`getBufferSize_bm1684x` and the op's `assign_sec_info` / `BackwardH`.

A `LocalRule` says how an op's input slice follows from its output slice
(`backward`), which coefficients it loads into local memory (`coeffs`, laid
out as the global rule lays them out, so both read the same bytes), the
scratch buffer its kernel needs (`buffer`) and the local call for one
slice (`command`). Each call gets `local_sec_info_t` for its slice: the
input rows it holds (a split H starts at −pad_top on the first slice and
ends pad_bottom past the last row, the convention of TPU-MLIR's
assign_sec_info), the output rows it writes, N and W likewise.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from xdsl.ir import Operation

from tpuc.base.registry import Registry
from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import (
    NativeContext,
    NotExpressible,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.local.dense import block_diagonal, dense_groups
from tpuc.passes.native.local.plan import EU_BYTES, NPU_NUM, GroupPlan, Slice
from tpuc.passes.native.three_ic import folded_filter, three_ic_mode
from tpuc.target.vendor.params import BcBinaryLocal, ConvLocal, TensorSpec

ELEMENT_BYTES = {"i8": 1, "u8": 1, "f16": 2, "bf16": 2, "i16": 2, "u16": 2, "f32": 4, "i32": 4,
                 "u32": 4}  # fmt: skip


class SecInfo(ctypes.Structure):
    """`local_sec_info_t` (Interfaces/LocalGenInterface.h, not in Param.h):
    96 bytes, the group type an enum (int)."""

    _fields_ = [
        (name, ctypes.c_int32)
        for name in (
            "group_type",
            "n_slice",
            "out_n_slice",
            "d_slice",
            "is_h_split",
            "h_idx",
            "h_slice",
            "out_h_idx",
            "out_h_slice",
            "is_w_split",
            "w_idx",
            "w_slice",
            "out_w_idx",
            "out_w_slice",
            "is_c_split",
            "c_idx",
            "c_slice",
        )  # fmt: skip
    ] + [
        ("hw_margins_opdA", ctypes.c_uint32),
        ("hw_margins_opdB", ctypes.c_uint32),
        ("n_idx", ctypes.c_int32),
        ("d_idx", ctypes.c_int32),
        ("out_addr", ctypes.c_int64),
    ]

    def to_bytes(self) -> bytes:
        return ctypes.string_at(ctypes.addressof(self), ctypes.sizeof(self))


@dataclass(frozen=True)
class Coeff:
    """A coefficient the op loads whole: its global address, NCHW view and
    dtype; compact in local memory (not EU-aligned), as TPU-MLIR keeps
    filters and biases."""

    addr: int
    dims: tuple[int, int, int, int]
    dtype: str
    lanes_copy: bool = False  # one plane for every lane (dims[1] = lanes), read with C stride 0
    moved: tuple[int, int, int, int] | None = None  # the load's view when not `dims` (lane_major)


def lane_major(ctx: NativeContext, name: str, rows, dtype: str) -> Coeff:
    """A per-channel coefficient [C, K] (filter taps, a bias) stored lane by
    lane: channel c's K values at lane c % 64, row c // 64, as the compact
    local layout holds them, so one load moves 64 runs of ceil(C/64)·K
    values instead of C runs of K (a 200-channel f32 bias: 3,791 cycles as
    C runs). The kernel still sees [1, C, 1, K]."""
    import numpy as np

    c, k = rows.shape
    if c <= NPU_NUM:
        return Coeff(ctx.coeffs.add(name, rows), (1, c, 1, k), dtype)
    planes = -(-c // NPU_NUM)
    lanes = np.zeros((NPU_NUM, planes, k), rows.dtype)
    for p in range(planes):
        part = rows[p * NPU_NUM : (p + 1) * NPU_NUM]
        lanes[: len(part), p] = part
    addr = ctx.coeffs.add(f"{name}_lanes", lanes.reshape(NPU_NUM, planes * k))
    return Coeff(addr, (1, c, 1, k), dtype, moved=(1, NPU_NUM, 1, planes * k))


def splits_h(op: Operation) -> bool:
    return True


@dataclass(frozen=True)
class LocalRule:
    """`splits_h`: whether the op computes a slice of rows from a slice of its
    input's rows (a pool over the whole plane does not: a group holding it
    is never cut along H)."""

    backward: Callable[[Operation, Slice], Slice]
    coeffs: Callable[[Operation, NativeContext], list[Coeff]]
    buffer: Callable[[Operation, GroupPlan], int]
    command: Callable[[Operation, NativeContext, GroupPlan, int], list[tuple]]
    splits_h: Callable[[Operation], bool] = splits_h


LOCAL_RULES: Registry[type[Operation], LocalRule] = Registry("native local rules")


def identity(op: Operation, out: Slice) -> Slice:
    return out


def window_backward(op: Operation, out: Slice, kernel: int, stride: int, dilation: int,
                    pad_top: int) -> Slice:  # fmt: skip
    """TPU-MLIR's Conv2D/Pool2D BackwardH, clamped to the input (fixSlice)."""
    ih, oh = nchw(op.operands[0])[2], nchw(op.results[0])[2]
    extent = (kernel - 1) * dilation + 1
    size = (out.h_slice - 1) * stride + max(extent, stride)
    start = out.h_idx * stride - pad_top
    end = ih if out.h_idx + out.h_slice == oh else min(start + size, ih)
    start = max(start, 0)
    return Slice(out.n_idx, out.n_slice, start, end - start)


def spec(ctx: NativeContext | None, dtype: str, dims, addr: int) -> bytes:
    s = TensorSpec()
    s.addr, s.dtype, s.dims = addr, dtype_code_of(dtype), len(dims)
    for i, d in enumerate(dims):
        s.shape[i] = d
    return s.to_bytes()


def dtype_code_of(dtype: str) -> int:
    from tpuc.base.dtypes import DTYPE_CODES

    return DTYPE_CODES[dtype]


def value_spec(plan: GroupPlan, value, step: int) -> bytes:
    """tensor_spec_t of an activation in local memory: its local address for
    `step`, its whole shape (the slice is in local_sec_info_t)."""
    tensor = plan.tensors[value]
    return spec(None, dtype_name(value), shape_of(value), tensor.addr_at(step))


def coeff_spec(plan: GroupPlan, op: Operation, index: int, coeff: Coeff) -> bytes:
    return spec(None, coeff.dtype, coeff.dims, plan.tensors[(op, index)].addrs[0])


def sec_info(op: Operation, plan: GroupPlan, step: int, pads=(0, 0)) -> SecInfo:
    """local_sec_info_t of `op` on `step`: the input rows of operand 0 (with
    pads[0] above the first and pads[1] below the last when H is split), the
    output rows; W and C whole."""
    (_, c, ih, iw), (_, _, oh, ow) = nchw(op.operands[0]), nchw(op.results[0])
    ins = plan.tensors[op.operands[0]].slice_at(step)
    out = plan.tensors[op.results[0]].slice_at(step)
    info = SecInfo()
    info.n_slice, info.n_idx, info.d_slice = ins.n_slice, ins.n_idx, 1
    info.h_idx, info.h_slice = ins.h_idx, ins.h_slice
    info.w_slice, info.c_slice = iw, c
    info.is_h_split = int(not (ins.h_idx == 0 and ins.h_slice == ih))
    if info.is_h_split:  # the padding rows belong to the first and last output slices only
        if out.h_idx == 0:
            info.h_idx = -pads[0]
            info.h_slice = ins.h_slice + pads[0]
        if out.h_idx + out.h_slice == oh:
            info.h_slice += pads[1]
    info.out_n_slice = out.n_slice
    info.out_h_idx, info.out_h_slice = out.h_idx, out.h_slice
    info.out_w_slice = ow
    return info


def local_command(op: Operation, function: str, param, info: SecInfo, inputs, outputs,
                  pointers=()) -> tuple:  # fmt: skip
    name = getattr(op, "names", ["op"])[0]
    return ("local", name, function, param.to_bytes(), list(pointers), info.to_bytes(),
            list(inputs), list(outputs))  # fmt: skip


def no_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    return []


def no_buffer(op: Operation, plan: GroupPlan) -> int:
    return 0


def local_rule(*classes: type[Operation], rule: LocalRule) -> None:
    LOCAL_RULES.register(*classes)(rule)


# --- Conv2D ----------------------------------------------------------------------------------


_FACTS: WeakKeyDictionary = WeakKeyDictionary()
"""Per-op facts the planner asks for on every candidate group (an op's
attributes and types are final once groups are planned)."""


def _fact(op: Operation, key: str, compute: Callable[[Operation], object]):
    facts = _FACTS.setdefault(op, {})
    if key not in facts:
        try:
            facts[key] = compute(op)
        except NotExpressible as exc:
            facts[key] = exc
    found = facts[key]
    if isinstance(found, NotExpressible):
        raise NotExpressible(*found.args)  # a fresh one: no traceback piles up
    return found


def conv_check(op: Operation) -> None:
    """Refuse a convolution without a local form (once per op)."""
    _fact(op, "conv_check", _conv_check)


def _conv_check(op: Operation) -> None:
    from tpuc.passes.native.conv import is_depthwise

    kernel = op.value("kernel_shape") or ()
    if len(kernel) != 2 or len(shape_of(op.operands[0])) != 4:
        raise NotExpressible("a local convolution that is not 2-D")
    quantized = quant_of(op.operands[0]) is not None
    if is_depthwise(op) and not quantized:
        # half-float depthwise has its own rule (half_depthwise.py); grouped
        # convolutions are the kernel's own groups (INT8 over the merged
        # coefficient, F16/BF16 over the per-group blocked filter)
        raise NotExpressible("a float depthwise convolution in a layer group (not written yet)")
    if max(op.value("strides") or [1]) > 15 or max(op.value("dilations") or [1]) > 15:
        raise NotExpressible("a local convolution with stride or dilation above 15")
    if quantized and dtype_name(op.results[0]) not in ("i8", "u8"):
        raise NotExpressible("a local INT8 convolution without an 8-bit result")
    if not quantized and not (is_float(op.operands[0]) and is_float(op.results[0])):
        raise NotExpressible("a local convolution of these types")
    if not quantized and dtype_name(op.operands[0]) == "f32":
        raise NotExpressible("a local F32 convolution (not written yet)")


def conv_backward(op: Operation, out: Slice) -> Slice:
    kh = op.value("kernel_shape")[0]
    sh = (op.value("strides") or [1, 1])[0]
    dh = (op.value("dilations") or [1, 1])[0]
    return window_backward(op, out, kh, sh, dh, (op.value("pads") or [0, 0, 0, 0])[0])


_PACKED: WeakKeyDictionary = WeakKeyDictionary()
"""An INT8 convolution's packed coefficients (weights are final once groups
are planned), for as long as the op lives."""


def conv_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The global rule's coefficients: INT8 the merged requant | bias |
    filter per lane; F16/BF16 the filter in blocks of 32 input channels and
    the f32 bias."""
    from tpuc.passes.native.conv import (
        coeff_shape,
        coeff_table,
        filter_data,
        ic_blocks,
        input_zero_point_bias,
        is_depthwise,
        pack_int8,
    )

    conv_check(op)
    oc = shape_of(op.results[0])[1]
    if quant_of(op.operands[0]) is not None:
        depthwise = is_depthwise(op)
        mode = three_ic(op)
        coeff = _PACKED.get(op)
        if coeff is None:  # the planner prices an op's groups many times: pack it once
            table = input_zero_point_bias(op, coeff_table(op, oc), filter_data(op))
            zp = quant_of(op.results[0]).zero_point
            filt = three_ic_filter(op, mode)
            if dense_groups(op):
                filt = block_diagonal(filt, op.value("group"))
            coeff = _PACKED[op] = pack_int8(table, zp, filt, depthwise=depthwise)
            coeff.flags.writeable = False  # shared: Coeffs.add finds it again by identity
        name = f"{op.names[0]}_coeff_lanes" + (f"_3ic{mode}" if mode else "")
        name += "_dense" if dense_groups(op) else ""
        addr = ctx.coeffs.add(name, coeff)
        return [Coeff(addr, coeff_shape(coeff, depthwise), dtype_name(op.operands[1]))]
    from tpuc.passes.native.conv import half_3ic_filter

    dtype = dtype_name(op.operands[0])
    blocked = ic_blocks(half_3ic_filter(op, filter_data(op)), 32)
    coeffs = [lane_major(ctx, f"{op.names[0]}_filter_ic32", blocked.reshape(oc, -1), dtype)]
    if not isinstance(op.operands[2].owner, top.NoneOp):
        import numpy as np

        from tpuc.ir.weights import read_weight

        bias = np.asarray(read_weight(op.operands[2].owner), np.float32).reshape(oc, 1)
        coeffs.append(lane_major(ctx, f"{op.names[0]}_bias_f32", bias, "f32"))
    return coeffs


BROADCAST_TO_BUFFER = 0x30  # use_3ic_optimize: the kernel broadcasts the input (TIU) to its buffer


def three_ic(op: Operation) -> int:
    """TPU-MLIR's `use_3ic_optimize` choice (three_ic.three_ic_mode, as the
    global rule) for an INT8 convolution with few input channels; 0 for
    depthwise, grouped, float and asymmetric (zero-point) convolutions."""
    return _fact(op, "three_ic", _three_ic)


def _three_ic(op: Operation) -> int:
    from tpuc.passes.native.conv import is_depthwise

    q = quant_of(op.operands[0])
    if q is None or q.zero_point or is_depthwise(op) or (op.value("group") or 1) != 1:
        return 0
    kh, kw = op.value("kernel_shape")
    return three_ic_mode(shape_of(op.operands[0])[1], kh, kw)


def three_ic_lanes(op: Operation) -> int:
    """Lanes one input channel of a 3ic INT8 convolution spans once
    broadcast (kh, kw or kh·kw by its mode); 0 without 3ic or for another op."""
    if not isinstance(op, tpu.Conv2DOp):
        return 0
    mode = three_ic(op)
    if not mode:
        return 0
    kh, kw = op.value("kernel_shape")
    return {1: kh, 2: kw, 3: kh * kw}[mode]


def broadcast_loaded(op: Operation, plan: GroupPlan) -> bool:
    """Whether the group loads the convolution's input already broadcast
    (TPU-MLIR's Load with use_3ic_optimize: one GDMA broadcast a channel),
    so the kernel neither copies it (TIU) nor needs the buffer for it."""
    found = plan.tensors.get(op.operands[0])
    return found is not None and found.bcast_lanes > 0


def three_ic_filter(op: Operation, mode: int):
    """The filter [oc, ic', k'] for `mode` (three_ic.folded_filter)."""
    from tpuc.passes.native.conv import filter_data

    filt = filter_data(op)
    oc, ic = filt.shape[:2]
    kh, kw = op.value("kernel_shape")
    return folded_filter(filt.reshape(oc, ic, kh * kw), mode, kh, kw)


def three_ic_buffer(op: Operation, plan: GroupPlan) -> int:
    """getBufferSize_bm1684x's 3ic part: the broadcast input (a copy of the
    input slice, unless the group loads it broadcast) and the merged rows,
    offsets and taps."""
    mode = three_ic(op)
    if not mode:
        return 0
    n, plane, taps = _three_ic_rows(op, plan, mode)
    copy = 0 if broadcast_loaded(op, plan) else plan.tensors[op.operands[0]].lane_bytes()
    return copy + -(-plane // 64) * 64 * n + 64 * 2 + taps


def _three_ic_rows(op: Operation, plan: GroupPlan, mode: int) -> tuple[int, int, int]:
    """(images, merged-row elements, taps) of a 3ic convolution's slice in `mode`."""
    ins, out = plan.tensors[op.operands[0]], plan.tensors[op.results[0]]
    iw, ow = ins.dims[3], out.dims[3]
    n = max(s.n_slice for s in ins.slices)
    h_in = max(s.h_slice for s in ins.slices)
    h_out = max(s.h_slice for s in out.slices)
    kh, kw = op.value("kernel_shape")
    plane = {1: h_out * iw, 2: h_in * ow, 3: h_out * ow}[mode]
    return n, plane, {1: kh, 2: kw, 3: kh * kw}[mode]


def grouped_buffer(op: Operation, plan: GroupPlan) -> int:
    """getBufferSize_bm1684x's part for groups > 1: one group's input
    channels of the input slice (EU-aligned planes) and two elements per
    input channel a lane holds; 0 for an ungrouped convolution."""
    groups = op.value("group") or 1
    if groups == 1 or dense_groups(op):
        return 0
    ins = plan.tensors[op.operands[0]]
    _, ic, _, iw = ins.dims
    per_lane = -(-(ic // groups) // NPU_NUM)
    eu = EU_BYTES // ins.dtype_bytes
    n = max(s.n_slice for s in ins.slices)
    plane = -(-max(s.h_slice for s in ins.slices) * iw // eu) * eu
    return (n * per_lane * plane + per_lane * 2) * ins.dtype_bytes


def half_3ic_buffer(op: Operation, plan: GroupPlan, mode: int) -> int:
    """getBufferSize_bm1684x's 3ic part for a 16-bit convolution: the
    broadcast input only with flag 0x20 (other readers), the merged rows
    (EU-aligned, 32 elements) of two bytes, 64·2, and the taps."""
    from tpuc.passes.native.conv import half_3ic_flag

    if not mode:
        return 0
    n, plane, taps = _three_ic_rows(op, plan, mode)
    copy = plan.tensors[op.operands[0]].lane_bytes() if half_3ic_flag(op) & 0x20 else 0
    return copy + -(-plane // 32) * 32 * n * 2 + 64 * 2 + taps * 2


def conv_buffer(op: Operation, plan: GroupPlan) -> int:
    """getBufferSize_bm1684x: an INT8 convolution with its requant merged
    keeps the int32 sums of its output slice (a depthwise one twice, and
    its taps; a 3ic one the broadcast input, three_ic_buffer); a grouped
    one, INT8 or 16-bit, a group's input slice (grouped_buffer: without
    it the kernel regroups the last group's input over the output)."""
    from tpuc.passes.native.conv import half_3ic_mode, is_depthwise

    if quant_of(op.operands[0]) is None:
        return half_3ic_buffer(op, plan, half_3ic_mode(op)) + grouped_buffer(op, plan)
    out = plan.tensors[op.results[0]]
    sums = out.lane_bytes() * 4 // out.dtype_bytes
    if not is_depthwise(op):
        return sums + three_ic_buffer(op, plan) + grouped_buffer(op, plan)
    kh, kw = op.value("kernel_shape")  # depthwise: a second int32 buffer and the taps
    return 2 * sums + -(-out.dims[1] // NPU_NUM) * kh * kw


def conv_geometry(op: Operation, plan: GroupPlan, step: int) -> tuple[ConvLocal, SecInfo]:
    """conv_local_param_t's geometry for the slice (pads, the input rows a
    split H slice skips, the scratch buffer) and its local_sec_info_t."""
    from tpuc.passes.native.conv import conv_common

    ih = nchw(op.operands[0])[2]
    pads = op.value("pads") or [0, 0, 0, 0]
    info = sec_info(op, plan, step, (pads[0], pads[2]))
    param = ConvLocal()
    p = param.spec
    conv_common(op, p)
    c = p.common
    c.pad_h_t, c.pad_h_b = (0, 0) if info.is_h_split else (pads[0], pads[2])
    p.buffer_local_addr = plan.local(op).buffer_addr
    if info.is_h_split:
        kh, sh = op.value("kernel_shape")[0], (op.value("strides") or [1, 1])[0]
        dh = (op.value("dilations") or [1, 1])[0]
        first = info.out_h_idx * sh - pads[0]
        size = (info.out_h_slice - 1) * sh + (kh - 1) * dh + 1
        size = min(size, size + first)
        first = max(0, first)
        p.unused_ht_for_input = first - max(0, info.h_idx)
        end = min(info.h_idx + info.h_slice, ih)
        p.unused_hb_for_input = max(0, end - (first + size))
    return param, info


def conv_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    from tpuc.passes.native.conv import coeff_table, filter_data, input_zero_point_bias, int8_spec

    out_dims = nchw(op.results[0])
    param, info = conv_geometry(op, plan, step)
    p, c = param.spec, param.spec.common
    coeffs = conv_coeffs(op, ctx)
    if quant_of(op.operands[0]) is not None:
        table = input_zero_point_bias(op, coeff_table(op, out_dims[1]), filter_data(op))
        int8_spec(p, op, table)
        p.with_requant = 1
        mode = three_ic(op)
        flags = 0 if broadcast_loaded(op, plan) else BROADCAST_TO_BUFFER
        c.use_3ic_optimize = mode | flags if mode else 0
        if dense_groups(op):
            c.groups = 1
    else:
        from tpuc.passes.native.conv import half_3ic_flag

        c.has_bias = len(coeffs) > 1
        c.use_3ic_optimize = half_3ic_flag(op)
    inputs = [value_spec(plan, op.operands[0], step)]
    inputs += [coeff_spec(plan, op, i, k) for i, k in enumerate(coeffs)]
    outputs = [value_spec(plan, op.results[0], step)]
    return [local_command(op, "backend_api_conv_local", param, info, inputs, outputs)]


local_rule(tpu.Conv2DOp, rule=LocalRule(conv_backward, conv_coeffs, conv_buffer, conv_command))


# --- elementwise binary ----------------------------------------------------------------------


def add_check(op: Operation) -> None:
    floats = all(is_float(v) for v in (*op.operands, *op.results))
    if len(op.operands) != 2 or not (floats or all(map(quant_of, (*op.operands, op.results[0])))):
        raise NotExpressible("a local Add other than of two float or two INT8 tensors")
    if not floats:
        int8_add_factors(op)
    from tpuc.passes.native.local import bias_add

    if bias_add.applies(op):
        bias_add.check(op)
    elif any(shape_of(v) != shape_of(op.results[0]) for v in op.operands):
        raise NotExpressible("a local Add with broadcast (not written yet)")
    coeff = op.value("coeff")
    if coeff and any(float(k) != 1.0 for k in coeff):
        raise NotExpressible(f"coeff {list(coeff)}")


def add_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """None, or a per-channel weight operand's (bias_add.py)."""
    from tpuc.passes.native.local import bias_add

    add_check(op)
    return bias_add.coeffs(op, ctx) if bias_add.applies(op) else []


def int8_add_factors(op: Operation) -> tuple[list[int], list[int]]:
    """(u8 multipliers, rshifts) of an INT8 Add in the chip's per-term form
    (binary.term_factors: zero points 0, no relu limit); the shared-rshift
    form (asymmetric, pre-quantized) has no local call: the chip's local
    add rounds each term."""
    from tpuc.passes.native.binary import term_factors

    factors = term_factors(op)
    if factors is None:
        rshift = list(op.value("rshift") or [])
        raise NotExpressible(f"a local INT8 Add with one rshift on the sum {rshift}")
    return factors


def add_buffer(op: Operation, plan: GroupPlan) -> int:
    """INT8: the kernel's 16-bit intermediate terms, twice the output slice's
    int16 bytes (TPU-MLIR's AddOp::getBufferSize_bm1684x)."""
    if is_float(op.results[0]):
        return 0
    out = plan.tensors[op.results[0]]
    return 2 * 2 * out.lane_bytes() // out.dtype_bytes


def add_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    """bcbinary ADD on the slice (Add.cpp's local form); INT8: u8 scale and
    rshift per input, each term rounded half up (the global call's contract)."""
    from tpuc.passes.native.binary import BINARY_ADD, relu_fields

    param = BcBinaryLocal()
    common = param.spec.common
    common.binary_type = BINARY_ADD
    common.if_relu, common.relu_upper_limit = relu_fields(op)
    common.scale_A = common.scale_B = 1
    common.f8_scale_A = common.f8_scale_B = 1.0
    if not is_float(op.results[0]):
        (common.scale_A, common.scale_B), (common.rshift_A, common.rshift_B) = int8_add_factors(op)
        common.relu_upper_limit = -1.0
    param.spec.buffer_addr = plan.local(op).buffer_addr
    info = sec_info(op, plan, step)
    from tpuc.passes.native.local import bias_add

    if bias_add.applies(op):
        inputs = [value_spec(plan, op.operands[0], step), bias_add.weight_spec(op, plan)]
    else:
        inputs = [value_spec(plan, v, step) for v in op.operands]
    outputs = [value_spec(plan, op.results[0], step)]
    return [local_command(op, "backend_api_bcbinary_local", param, info, inputs, outputs)]


local_rule(tpu.AddOp, rule=LocalRule(identity, add_coeffs, add_buffer, add_command))


def element_bytes(value) -> int:
    return ELEMENT_BYTES[dtype_name(value)]


__all__ = ["LOCAL_RULES", "Coeff", "LocalRule", "SecInfo", "element_bytes"]
