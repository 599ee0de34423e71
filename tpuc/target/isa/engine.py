"""Engine-level commands: opcodes named for what a hardware unit does, each
with a typed, fixed-layout parameter block (docs/isa.md "Engine-level
commands").

A command keeps the common layout (header record, one tensor record per
operand and result); its parameter area is the opcode's block, one
`struct` layout per opcode, zero-padded to whole records. One table
(`BLOCKS`) drives encoding and decoding, and the requant epilogue is the
same sub-block (`REQUANT`) in every block that has one. Nothing here knows
IR or kernels: codegen fills the blocks from ops, the simulator
(`tpuc.target.runtime.engine`) turns them into the kernel library's records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# --- opcodes (append only, never renumber) ----------------------------------------------

TIU_CONV = 0x200  # convolution: normal, depthwise, transposed
TIU_MATMUL = 0x201  # matrix multiply (+ bias) with requant
TIU_ARITH = 0x202  # elementwise add/sub/mul with per-input multipliers + requant
TIU_POOL = 0x203  # window pooling (avg)
TIU_REDUCE = 0x204  # sum over axes (ReduceSum / ReduceMean), max / min of stored values
TIU_LUT = 0x205  # table lookup on stored integers
TIU_CVT = 0x206  # conversion: requant of one tensor into a (window of a) result
TIU_SFU = 0x207  # float unary functions and activations (function code = the Unary kind)
TIU_FARITH = 0x208  # float elementwise arithmetic: add/sub/mul/max/min/div/pow, const forms
TIU_NORM = 0x209  # float normalizations over axes: softmax, layer/instance/group/batch norm, LRN
TIU_ARG = 0x20C  # index of the max / min along one axis (ArgMax, ArgMin)
TIU_RESIZE = 0x20A  # resize (ONNX Resize): nearest / linear / cubic taps per resized axis
TIU_RNN = 0x20B  # a whole LSTM / GRU sequence: matmuls on the cube, gates on arith / SFU

GDMA_MOVE = 0x400  # global -> global strided copy (the former GDMA_COPY, same number)
GDMA_LOAD = 0x401  # global -> local
GDMA_STORE = 0x402  # local -> global
GDMA_L2L = 0x403  # local -> local
GDMA_FILL = 0x404  # every destination element := one constant
GDMA_GATHER = 0x405  # destination := source rows picked along one axis by an index tensor

CPU_TOPK = 0x600  # host function: TopK (0x600-0x60F: CPU functions, TPU-MLIR's cpu layers)

ENGINE_OPCODES: dict[str, int] = {
    "TIU_CONV": TIU_CONV,
    "TIU_MATMUL": TIU_MATMUL,
    "TIU_ARITH": TIU_ARITH,
    "TIU_POOL": TIU_POOL,
    "TIU_REDUCE": TIU_REDUCE,
    "TIU_LUT": TIU_LUT,
    "TIU_CVT": TIU_CVT,
    "TIU_SFU": TIU_SFU,
    "TIU_FARITH": TIU_FARITH,
    "TIU_NORM": TIU_NORM,
    "TIU_ARG": TIU_ARG,
    "TIU_RESIZE": TIU_RESIZE,
    "TIU_RNN": TIU_RNN,
    "GDMA_MOVE": GDMA_MOVE,
    "GDMA_LOAD": GDMA_LOAD,
    "GDMA_STORE": GDMA_STORE,
    "GDMA_L2L": GDMA_L2L,
    "GDMA_FILL": GDMA_FILL,
    "GDMA_GATHER": GDMA_GATHER,
    "CPU_TOPK": CPU_TOPK,
}
ENGINE_NAMES: dict[int, str] = {code: name for name, code in ENGINE_OPCODES.items()}
TIU_ENGINE_OPCODES = frozenset(c for n, c in ENGINE_OPCODES.items() if n.startswith("TIU_"))
GDMA_OPCODES = frozenset(c for n, c in ENGINE_OPCODES.items() if n.startswith("GDMA_"))
CPU_OPCODES = frozenset(c for n, c in ENGINE_OPCODES.items() if n.startswith("CPU_"))
"""Host functions of CPU subnets (header engine ENGINE_CPU; 0x600-0x60F reserved)."""

# --- enumerations inside blocks -----------------------------------------------------------

CONV_NORMAL, CONV_DEPTHWISE, CONV_TRANSPOSED = 0, 1, 2
ARITH_ADD, ARITH_SUB, ARITH_MUL = 0, 1, 2
ARITH_OPS = {ARITH_ADD: "add", ARITH_SUB: "sub", ARITH_MUL: "mul"}
FARITH_OPS = (
    "Add", "Sub", "Mul", "Max", "Min", "Div", "Pow", "Scale", "Where", "PRelu",
    "Equal", "NotEqual", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor",
)  # fmt: skip
"""TIU_FARITH op codes (index = code; append only)."""
FARITH_TENSORS, FARITH_CONST, FARITH_CONST_REVERSED = 0, 1, 2
POOL_AVG, POOL_MAX = 0, 1
CVT_REQUANT, CVT_CAST, CVT_RESCALE = 0, 1, 2
CAST_TO = (
    "", "F32", "F16", "BF16", "BOOL", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32",
    "INT64", "UINT64",
)  # fmt: skip
"""TIU_CVT cast `to` codes (index = code; "" : none): TOP Cast's conversion target."""
NORM_FUNCTIONS = ("Softmax", "LayerNorm", "InstanceNorm", "GroupNorm", "BatchNorm", "LRN")
"""TIU_NORM function codes (index = code; append only)."""
REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN = 0, 1, 2, 3
REDUCE_FUNCTIONS = (
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum",
)  # fmt: skip
"""TIU_REDUCE mode codes of a float command (`kind` 0; index = code, append only):
`tpuc.kernels.reduce.REDUCE` names. Integer commands use modes 0-3 only."""
SFU_FUNCTIONS = (
    "Exp", "Log", "Sigmoid", "Tanh", "Rsqrt", "Reciprocal",  # the first six: the original codes
    "Relu", "LeakyRelu", "GELU", "HardSigmoid", "Elu", "Pow", "Clip", "Not",
    "SiLU", "HardSwish", "Mish", "Softplus", "Sqrt", "Erf", "Abs", "Floor", "Ceil", "Round",
    "Sin", "Cos", "Sign",
)  # fmt: skip
"""TIU_SFU function codes (index = code; append only): `tpuc.kernels.activation` kinds."""
SFU_OPTIONS = ("", "log", "tanh", "normal")
"""TIU_SFU option codes (index = code): the `Unary.option` strings."""
ARG_MODES = ("ArgMax", "ArgMin")
"""TIU_ARG mode codes (index = code): `tpuc.kernels.reduce.Arg` modes."""
ROUND_MODES = ("HalfAwayFromZero", "HalfUp", "HalfToEven", "Down", "DoubleRound")
"""Requant round mode codes (index = code); tpuc.base.numerics.ROUND_MODES' names."""
RESIZE_MODES = ("nearest", "linear", "cubic")
"""TIU_RESIZE mode codes (index = code; append only): `Interp.mode`."""
RESIZE_COORD_MODES = (
    "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
    "half_pixel_symmetric",
)  # fmt: skip
"""TIU_RESIZE coordinate transformation codes (append only): `Interp.coord_mode`."""
RESIZE_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
"""TIU_RESIZE nearest rounding codes (append only): `Interp.nearest_mode`."""
RNN_LSTM, RNN_GRU = 0, 1
RNN_BIAS, RNN_INITIAL_H, RNN_INITIAL_C = 1, 2, 4
"""TIU_RNN `present` bits: which optional operands (3, 4, 5) the command carries."""

MAX_SPATIAL = 3  # conv / pool spatial axes
MAX_INPUTS = 4  # ARITH inputs
MAX_AXES = 8  # REDUCE axes
MAX_RESIZE_AXES = 8  # RESIZE target dims
MAX_FARITH_INPUTS = 255  # FARITH inputs (its n_inputs byte; only `coeff` has MAX_INPUTS slots)


# --- the requant sub-block ----------------------------------------------------------------


@dataclass(frozen=True)
class RequantBlock:
    """requant(acc, multiplier, rshift) + Z_out, ReLU, saturation. With
    `per_channel` the multipliers and rshifts are the command's tensor
    operands (i32, one per channel of `axis`) and the two scalars are unused."""

    multiplier: int = 1
    rshift: int = 0
    round_mode: int = 0  # index into ROUND_MODES
    relu: int = 0  # 0 off, 1 on
    axis: int = 1
    per_channel: int = 0
    relu_limit: float = math.nan  # NaN: no limit


# --- per-opcode blocks ----------------------------------------------------------------------


@dataclass(frozen=True)
class ConvBlock:
    mode: int  # CONV_*
    n_spatial: int
    group: int
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_begins: tuple[int, ...]
    pad_ends: tuple[int, ...]
    output_padding: tuple[int, ...]  # transposed only (may be empty)
    n_output_padding: int
    requant: RequantBlock


@dataclass(frozen=True)
class MatMulBlock:
    right_transpose: int
    requant: RequantBlock


@dataclass(frozen=True)
class ArithBlock:
    """add/sub: term_i = round((q_i − Z_i)·multipliers[i] / 2^rshifts[i]) by
    the requant's round mode (rshift 0: exact), Σ ±term_i, then the requant
    (its multiplier 1). bm168x rounds each term (its rshift on the sum 0);
    cv18xx and asymmetric Adds shift the exact sum once (rshifts 0)."""

    op: int  # ARITH_*
    n_inputs: int
    multipliers: tuple[int, ...]  # per input (add/sub); unused by mul
    requant: RequantBlock
    rshifts: tuple[int, ...] = ()  # per input (add/sub); () is all 0

    def __post_init__(self):
        if not self.rshifts:  # one spelling of "no term shifts" (decoding gives zeros)
            object.__setattr__(self, "rshifts", (0,) * self.n_inputs)


@dataclass(frozen=True)
class PoolBlock:
    mode: int  # POOL_*
    ceil_mode: int
    n_kernel: int
    n_strides: int
    n_pads: int
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # begins then ends
    requant: RequantBlock
    count_include_pad: int = 0  # float avg: the padding counts in the divisor


@dataclass(frozen=True)
class ReduceBlock:
    mode: int  # REDUCE_*
    keepdims: int
    n_axes: int
    axes: tuple[int, ...]
    requant: RequantBlock


@dataclass(frozen=True)
class LutBlock:
    """out = table[q − qmin_in] (operand 1: the table, [n] or one row per
    channel of axis 1, [C, n]); `per_channel` says which."""

    per_channel: int


@dataclass(frozen=True)
class CvtBlock:
    """mode CVT_REQUANT / CVT_RESCALE: out = saturate(ReLU(requant(in − Z_in) + Z_out))
    into the result (a plain copy when multiplier 1, rshift 0 and Z_in =
    Z_out). mode CVT_CAST: the result's element from the input's through
    the real value (`to`: a CAST_TO conversion first), rounded by the
    requant sub-block's round mode."""

    requant: RequantBlock
    mode: int = CVT_REQUANT
    to: int = 0  # index into CAST_TO; CVT_RESCALE: 1 per-channel op (RequantIntAxis, DequantInt)


@dataclass(frozen=True)
class NormBlock:
    """A float normalization (NORM_FUNCTIONS[function]) over `axis`, then
    rounding to the result type; unused fields 0."""

    function: int
    flags: int  # bit 0: Softmax log / BatchNorm fused ReLU
    axis: int
    count: int  # GroupNorm groups, LRN size
    eps: float  # eps; LRN alpha
    beta: float  # LRN beta
    bias: float  # LRN bias
    relu_limit: float  # BatchNorm fused ReLU limit; NaN: none


@dataclass(frozen=True)
class SfuBlock:
    """out = round(f(in)) in float32, rounded to the result's float type.
    `alpha`/`beta` NaN: the parameter is unset (None in `Unary`)."""

    function: int  # index into SFU_FUNCTIONS
    alpha: float
    beta: float
    option: int = 0  # index into SFU_OPTIONS


@dataclass(frozen=True)
class FarithBlock:
    """Float elementwise arithmetic (float32, then rounding to the result
    type): the inputs folded left to right by `op` (Add: input i scaled by
    coeff[i] when any is not 1), or, in a const form, input `op` const_val
    (reversed: const_val `op` input). `relu_limit` NaN: no limit."""

    op: int  # index into FARITH_OPS
    n_inputs: int
    n_coeff: int
    form: int  # FARITH_TENSORS / FARITH_CONST / FARITH_CONST_REVERSED
    relu: int
    coeff: tuple[float, ...]
    const_val: float
    relu_limit: float


@dataclass(frozen=True)
class ArgBlock:
    """The index (float32) of the max (ArgMax) or min (ArgMin) along `axis`;
    ties: the first index, or the last with `select_last_index`."""

    mode: int  # index into ARG_MODES
    keepdims: int
    select_last_index: int
    axis: int


@dataclass(frozen=True)
class FillBlock:
    """Every destination element := `value` (float32; a float command then
    rounds it to the destination's float type; an integer destination holds
    it as its stored integer)."""

    value: float


@dataclass(frozen=True)
class GatherBlock:
    """dst = take(src, indices, axis): the indices are float-valued integers,
    negative ones count from the end of the axis."""

    axis: int


@dataclass(frozen=True)
class ResizeBlock:
    """ONNX Resize of the trailing `n_target` dims to `target_shape`
    (`tpuc.kernels.resize.Interp`); `scales` (when `n_scales`) are the
    model's factors for those dims. `cubic_coeff_a` NaN: unset (None)."""

    mode: int  # index into RESIZE_MODES
    coord_mode: int  # index into RESIZE_COORD_MODES
    nearest_mode: int  # index into RESIZE_NEAREST_MODES
    exclude_outside: int
    n_target: int
    n_scales: int
    cubic_coeff_a: float
    target_shape: tuple[int, ...]
    scales: tuple[float, ...]


@dataclass(frozen=True)
class RnnBlock:
    """A whole LSTM / GRU sequence (`tpuc.kernels.rnn.Recurrent`):
    operands x, W, R, then B, initial h (and c) as `present` says."""

    cell: int  # RNN_LSTM / RNN_GRU
    directions: int  # 1 forward, 2 bidirectional
    batch_first: int
    linear_before_reset: int  # GRU only
    present: int  # RNN_BIAS | RNN_INITIAL_H | RNN_INITIAL_C
    hidden: int  # 0: from R's shape


@dataclass(frozen=True)
class TopkBlock:
    """CPU TopK along `axis` (`tpuc.kernels.reduce.TopK`): values, then
    indices as float32; `sorted` is carried (values always come sorted)."""

    axis: int
    k: int
    largest: int
    sorted: int
