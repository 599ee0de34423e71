"""Engine-level commands on the kernel library, without IR.

A TIU engine command's parameter block and tensor records become the
library's frozen records (`Conv`, `MatMul`, `Eltwise`, `Concat`, `Pool`,
`Reduce`, each with its `Requant`; `Lut`; `Unary`) once, when the bmodel is loaded; running
the step reads the operands from device memory, calls `tpuc.kernels`, and
writes the results. GDMA commands (MOVE, LOAD, STORE, L2L) are strided
copies. Later opcodes register their builders from their own modules
(`engine_resize_rnn`: TIU_RESIZE, TIU_RNN; `engine_cpu`: the CPU subnets'
host functions, which run as engine steps too). This module imports no
dialect, pass or interpreter (an import contract checks it): the steps here
are the simulator on the instruction set alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tpuc.base.dtypes import ELEMENT_TYPES
from tpuc.base.errors import TpucError
from tpuc.kernels import (
    arith,
    data,
    float_conv,
    half_conv,
    half_deconv,
    half_eltwise,
    norm,
    pooling,
    sums,
)
from tpuc.kernels import cast as cast_lib
from tpuc.kernels import conv as conv_lib
from tpuc.kernels import elementwise as ew
from tpuc.kernels import reduce as reduce_lib
from tpuc.kernels.activation import PRelu, Unary, prelu, unary
from tpuc.kernels.chip_float import chip_kernel
from tpuc.kernels.conv_plan import ConvGeometry
from tpuc.kernels.element import F32, Element
from tpuc.kernels.lut import Lut, lut
from tpuc.kernels.matmul import MatMul, matmul
from tpuc.kernels.maxpool import max_pool
from tpuc.kernels.requant import NO_RELU, Relu, Requant
from tpuc.kernels.rounding import half_rounder, round_float
from tpuc.target.chips import CHIPS
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_CPU,
    SPACE_LOCAL,
    TENSOR_COEFF,
    TENSOR_QUANTIZED,
    Command,
    TensorRecord,
)
from tpuc.target.runtime.device import Device, Region

Bound = tuple[TensorRecord, Region]


class Step:
    """One executable command: `run()` reads its operands from device memory,
    computes, and writes its results."""

    def __init__(self, command: Command, device: Device, what: str):
        self.command, self.device, self.what = command, device, what
        self.operands: list[Bound | None] = [
            self._bind(r, f"{what} operand {i}") for i, r in enumerate(command.operands)
        ]
        self.results: list[Bound] = [
            self._bind(r, f"{what} result {i}") for i, r in enumerate(command.results)
        ]

    def _bind(self, record: TensorRecord, what: str) -> Bound | None:
        if record.absent:
            return None
        return record, self.device.region(record, what)

    def read(self, index: int) -> np.ndarray | None:
        bound = self.operands[index]
        if bound is None:
            return None
        record, region = bound
        return self.device.read(record, region, coeff=bool(record.flags & TENSOR_COEFF))

    def write_results(self, values) -> list[np.ndarray]:
        """Check the computed shapes against the result records and store them."""
        results = list(values) if isinstance(values, tuple) else [values]
        if len(results) != len(self.results):
            raise TpucError(
                f"{self.what}: kernel gave {len(results)} results, command has {len(self.results)}"
            )
        arrays = []
        for (record, region), value in zip(self.results, results, strict=True):
            array = np.asarray(value, np.float32)
            if array.shape != record.shape:
                raise TpucError(
                    f"{self.what}: computed shape {list(array.shape)}, "
                    f"command says {list(record.shape)}"
                )
            self.device.write(record, region, array)
            arrays.append(array)
        return arrays

    def run(self) -> list[np.ndarray]:
        raise NotImplementedError


class CopyStep(Step):
    """GDMA MOVE / LOAD / STORE / L2L: dst[i] = src[i], bytes as stored."""

    def __init__(self, command: Command, device: Device, what: str):
        super().__init__(command, device, what)
        if len(self.operands) != 1 or len(self.results) != 1 or self.operands[0] is None:
            raise TpucError(f"{what}: a GDMA command has one source and one destination")
        (src, _), (dst, _) = self.operands[0], self.results[0]
        if src.dtype != dst.dtype or math.prod(src.shape) != math.prod(dst.shape):
            raise TpucError(f"{what}: source and destination differ in dtype or size")

    def run(self) -> list[np.ndarray]:
        (src, src_region), (dst, dst_region) = self.operands[0], self.results[0]
        values = self.device.get(src, src_region)  # lane records: per plane group
        self.device.put(dst, dst_region, values.reshape(dst.shape))
        return []


# --- records from commands ------------------------------------------------------------------


def element_of(record: TensorRecord) -> Element:
    """A tensor record's elements as the library sees them."""
    if record.flags & TENSOR_QUANTIZED:
        return Element(
            record.dtype, record.scale, record.zero_point, record.storage_min, record.storage_max
        )
    return Element(record.dtype) if record.dtype in ELEMENT_TYPES else F32


def requant_of(block: isa.RequantBlock, out: TensorRecord, multipliers=None, rshifts=None):
    relu = Relu()
    if block.relu:
        relu = Relu(True, None if math.isnan(block.relu_limit) else block.relu_limit)
    return Requant(
        element_of(out),
        multipliers if multipliers is not None else (block.multiplier,),
        rshifts if rshifts is not None else (block.rshift,),
        block.axis,
        isa.ROUND_MODES[block.round_mode],
        relu,
    )


Kernel = Callable[..., object]


def _half_avg(element, f32_pool: Kernel) -> Kernel:
    """F16/BF16 average pooling: the chip's global form where it applies
    (`pooling.half_global_avg`), else `f32_pool` (the chip's f32 pooling on
    bm168x) then rounding."""
    rounder = half_rounder(element)

    def run(p, x):
        if pooling.half_global_applies(p, x):
            return pooling.half_global_avg(p, x, rounder)
        return rounder(f32_pool(p, x))

    return run


def _stored_reduce(p: data.Stored, x: np.ndarray) -> np.ndarray:
    return data.stored(p, reduce_lib.reduce, x)


def _stored_fold(p: data.Stored, *xs: np.ndarray) -> np.ndarray:
    return data.stored(p, ew.fold, *xs)


class EngineStep(Step):
    """A TIU engine-level command: its library record and kernel, built at load."""

    def __init__(self, command: Command, device: Device, what: str):
        super().__init__(command, device, what)
        opcode = command.header.opcode
        self.name = isa.ENGINE_NAMES[opcode]
        try:
            block = block_codec.decode_block(opcode, command.params)
        except block_codec.BlockError as exc:
            raise TpucError(f"{what}: {exc}") from None
        build = BUILDERS.get(opcode)
        if build is None:
            raise TpucError(f"{what}: {self.name} is not executable yet")
        self.block = block
        # per-channel values read while building (multipliers, shifts) are
        # in local memory only once a layer group loaded them: build again
        # when the step runs
        self.rebuild = any(r.space == SPACE_LOCAL for r in command.operands)
        try:
            self.record, self.kernel, self.args = build(self, block)
        except (IndexError, ValueError, TypeError) as exc:
            raise TpucError(f"{what}: malformed {self.name}: {exc}") from None

    def run(self) -> list[np.ndarray]:
        if self.rebuild:
            self.record, self.kernel, self.args = BUILDERS[self.command.header.opcode](
                self, self.block
            )
        args = [self.read(i) for i in self.args]
        try:
            out = self.kernel(self.record, *args)
        except TpucError as exc:
            raise TpucError(f"{self.what} ({self.name}): {exc}") from None
        except Exception as exc:  # a numpy error inside a kernel: name the command
            raise TpucError(f"{self.what} ({self.name}) failed: {exc}") from exc
        return self.write_results(out)

    # --- per opcode -----------------------------------------------------------------------

    def _channel_values(self, index: int) -> tuple[int, ...]:
        return tuple(int(v) for v in np.asarray(self.read(index)).reshape(-1))

    def _requant(self, block: isa.RequantBlock, tensors: tuple[int, int] = (3, 4)) -> Requant:
        out = self.command.results[0]
        if block.per_channel:
            m, r = (self._channel_values(i) for i in tensors)
            return requant_of(block, out, m, r)
        return requant_of(block, out)

    @property
    def family(self) -> str | None:
        """The chip family of the device (its own float kernels: `chip_float`)."""
        chip = CHIPS.get(str(self.device.chip).lower())
        return None if chip is None else chip.family

    @property
    def is_float(self) -> bool:
        """`kind` 0: float32 arithmetic, then rounding to the result type."""
        return self.command.header.kind == 0

    def _rounded(self, kernel: Kernel) -> Kernel:
        """The float TPU kernel: `kernel`, then rounding to the result's type."""
        element = element_of(self.command.results[0])

        def run(p, *args):
            return round_float(kernel(p, *args), element)

        return run

    @staticmethod
    def _float_relu(block: isa.RequantBlock) -> Relu:
        if not block.relu:
            return Relu()
        return Relu(True, None if math.isnan(block.relu_limit) else block.relu_limit)

    def _float_conv(self, b: isa.ConvBlock):
        attrs = float_conv.ConvAttrs(
            b.strides,
            b.dilations,
            b.pad_begins + b.pad_ends,
            b.group,
            self._float_relu(b.requant),
        )
        half = self._half_element()
        if b.mode == isa.CONV_TRANSPOSED:
            record = float_conv.Deconv(attrs, b.output_padding)
            if half is not None:
                return half_deconv.HalfDeconv(record, half), half_deconv.deconv
            return record, self._rounded(float_conv.deconv)
        if half is not None:
            return half_conv.HalfConv(attrs, half), half_conv.conv
        return attrs, self._rounded(chip_kernel(self.family, float_conv.conv))

    def _half_element(self) -> Element | None:
        """The half element when the (first two) operands and the result all
        have it on a bm168x chip: its F16/BF16 arithmetic (`half_conv`,
        `half_eltwise`)."""
        if not half_conv.applies(self.family):
            return None
        records = [*self.command.operands[:2], self.command.results[0]]
        elements = {element_of(r) for r in records if not r.absent}
        element = next(iter(elements))
        return element if len(elements) == 1 and element.dtype in ("f16", "bf16") else None

    def _conv(self, b: isa.ConvBlock):
        if self.is_float:
            record, kernel = self._float_conv(b)
            return record, kernel, (0, 1, 2)
        ops = self.command.operands
        geometry = ConvGeometry(b.kernel, b.strides, b.dilations, b.pad_begins, b.pad_ends, b.group)
        record = conv_lib.Conv(
            geometry, element_of(ops[0]), self._requant(b.requant), b.output_padding
        )
        kernel = conv_lib.deconv if b.mode == isa.CONV_TRANSPOSED else conv_lib.conv
        return record, kernel, (0, 1, 2)

    def _batch_matmul(self) -> bool:
        """Two operands of the same batch dims and no bias (half_ops.batch_matmul)."""
        left, right, *rest = self.command.operands
        no_bias = not rest or rest[0].absent
        same = len(left.shape) == len(right.shape) >= 2 and left.shape[:-2] == right.shape[:-2]
        return no_bias and same

    def _matmul(self, b: isa.MatMulBlock):
        if self.is_float:
            record = float_conv.MatMul(bool(b.right_transpose), self._float_relu(b.requant))
            right = self.command.operands[1]
            half = self._half_element()
            if half is not None and right.flags & TENSOR_COEFF and math.prod(right.shape[:-2]) == 1:
                return half_conv.HalfMatMul(record, half), half_conv.matmul, (0, 1, 2)
            if half is not None and self._batch_matmul():
                return half_conv.HalfMatMul(record, half), half_conv.batch_matmul, (0, 1)
            return record, self._rounded(float_conv.matmul), (0, 1, 2)
        ops = self.command.operands
        record = MatMul(
            element_of(ops[0]),
            element_of(ops[1]),
            self._requant(b.requant),
            bool(b.right_transpose),
        )
        return record, matmul, (0, 1, 2)

    def _arith(self, b: isa.ArithBlock):
        inputs = tuple(element_of(r) for r in self.command.operands)
        if len(inputs) != b.n_inputs:
            raise ValueError(f"{len(inputs)} operands for {b.n_inputs} inputs")
        kernel = {isa.ARITH_ADD: arith.add, isa.ARITH_SUB: arith.sub, isa.ARITH_MUL: arith.mul}[
            b.op
        ]
        record = arith.Eltwise(inputs, self._requant(b.requant), b.multipliers, b.rshifts)
        return record, kernel, tuple(range(len(inputs)))

    def _cvt(self, b: isa.CvtBlock):
        if b.mode == isa.CVT_RESCALE:
            record = cast_lib.Rescale(
                element_of(self.command.operands[0]), self._requant(b.requant), bool(b.to)
            )
            return record, cast_lib.rescale, (0,)
        if b.mode == isa.CVT_CAST:
            ops, results = self.command.operands, self.command.results
            record = cast_lib.Cast(
                element_of(ops[0]),
                element_of(results[0]),
                isa.CAST_TO[b.to] or None,
                isa.ROUND_MODES[b.requant.round_mode],
            )  # f32 -> f16/bf16 on bm168x: the chip's rounding (chip_cast)
            return record, chip_kernel(self.family, cast_lib.cast), (0,)
        requant = self._requant(b.requant)
        r = requant.multiplier, requant.rshift
        record = arith.Concat((element_of(self.command.operands[0]),), *r, 0, requant)
        return record, arith.concat, (0,)

    def _pool(self, b: isa.PoolBlock):
        kernels = {isa.POOL_AVG: sums.avg_pool, isa.POOL_MAX: max_pool}
        if b.mode not in kernels:
            raise ValueError(f"pool mode {b.mode}")
        if self.is_float:
            record = pooling.Pooling(
                b.kernel,
                b.strides,
                b.pads,
                bool(b.ceil_mode),
                bool(b.count_include_pad),
                self._float_relu(b.requant),
            )
            if b.mode == isa.POOL_MAX:
                kernel = pooling.max_pool
            else:  # f32: the chip's own (chip_float.avg_pool) on bm168x
                kernel = chip_kernel(self.family, pooling.avg_pool)
            element = element_of(self.command.results[0])
            if b.mode == isa.POOL_AVG and element.dtype in ("f16", "bf16"):
                return record, _half_avg(element, kernel), (0,)
            return record, self._rounded(kernel), (0,)
        record = sums.Pool(
            b.kernel,
            b.strides,
            b.pads,
            bool(b.ceil_mode),
            element_of(self.command.operands[0]),
            self._requant(b.requant),
        )
        return record, kernels[b.mode], (0,)

    def _reduce(self, b: isa.ReduceBlock):
        if self.is_float:  # TOP's reduction, rounded to the result type
            if b.mode >= len(isa.REDUCE_FUNCTIONS):
                raise ValueError(f"reduce mode {b.mode}")
            move = reduce_lib.Reduction(isa.REDUCE_FUNCTIONS[b.mode], b.axes, bool(b.keepdims))
            return move, self._rounded(reduce_lib.reduce), (0,)
        stored = {isa.REDUCE_MAX: "ReduceMax", isa.REDUCE_MIN: "ReduceMin"}.get(b.mode)
        if stored is not None:  # on stored values, as the interpreter's moved TOP kernel
            move = reduce_lib.Reduction(stored, b.axes, bool(b.keepdims))
            out = element_of(self.command.results[0])
            return data.Stored(move, NO_RELU, out), _stored_reduce, (0,)
        if b.mode not in (isa.REDUCE_SUM, isa.REDUCE_MEAN):
            raise ValueError(f"reduce mode {b.mode}")
        record = sums.Reduce(
            b.axes, bool(b.keepdims), element_of(self.command.operands[0]), self._requant(b.requant)
        )
        return record, sums.reduce_sum, (0,)

    def _lut(self, b: isa.LutBlock):
        x, table = self.command.operands[:2]
        if (len(table.shape) == 2) != bool(b.per_channel):
            raise ValueError(
                f"a table of shape {list(table.shape)} with per_channel {b.per_channel}"
            )
        return Lut(element_of(x), element_of(self.command.results[0])), lut, (0, 1)

    def _farith(self, b: isa.FarithBlock):
        kind = isa.FARITH_OPS[b.op]
        if len(self.command.operands) != b.n_inputs:
            raise ValueError(f"{len(self.command.operands)} operands for {b.n_inputs} inputs")
        relu = Relu()
        if b.relu:
            relu = Relu(True, None if math.isnan(b.relu_limit) else b.relu_limit)
        if not self.is_float:  # Max/Min of stored integers sharing one type
            if kind not in ("Max", "Min") or b.form != isa.FARITH_TENSORS or b.coeff:
                raise ValueError(f"integer FARITH {kind} form {b.form}")
            record = data.Stored(ew.Fold(kind), relu, element_of(self.command.results[0]))
            return record, _stored_fold, tuple(range(b.n_inputs))
        if b.form != isa.FARITH_TENSORS and kind in ew.COMPARE:  # CompareConst
            reverse = b.form == isa.FARITH_CONST_REVERSED
            record, kernel = ew.Compare(kind, b.const_val, reverse), ew.compare
        elif b.form != isa.FARITH_TENSORS:
            reverse = b.form == isa.FARITH_CONST_REVERSED
            record, kernel = ew.Const(kind, b.const_val, reverse, relu), ew.const
            if (half := self._half_element()) is not None:
                return half_eltwise.HalfConst(record, half), half_eltwise.const, (0,)
        elif kind == "Scale":
            record, kernel = ew.Scale(relu), ew.scale
            if (half := self._half_element()) is not None:
                args = tuple(range(b.n_inputs))
                return half_eltwise.HalfScale(record, half), half_eltwise.scale, args
        elif kind == "Where":
            record, kernel = ew.Where(), ew.where
        elif kind == "PRelu":
            record, kernel = PRelu(), prelu
        elif kind in ew.COMPARE:
            record, kernel = ew.Compare(kind), ew.compare
        elif kind in ew.FOLDS:
            record, kernel = ew.Fold(kind, relu, b.coeff), self._f32_own(ew.fold)
        else:
            record, kernel = ew.Binary(kind, relu), self._f32_own(ew.binary)
        return record, self._rounded(kernel), tuple(range(b.n_inputs))

    def _f32_own(self, kernel: Kernel) -> Kernel:
        """The chip family's own form of an elementwise kernel when every
        operand and the result are f32 (bm168x flushes subnormals there:
        `chip_float.fold`, `binary`), else `kernel`."""
        records = [*self.command.operands, self.command.results[0]]
        if any(element_of(r).dtype != "f32" for r in records if not r.absent):
            return kernel
        return chip_kernel(self.family, kernel)

    def _norm(self, b: isa.NormBlock):
        kind = isa.NORM_FUNCTIONS[b.function]
        if kind == "Softmax":
            record = norm.Softmax(b.axis, bool(b.flags & 1))
            kernel = chip_kernel(self.family, norm.softmax)
        elif kind == "LayerNorm":
            record = norm.LayerNorm(b.axis, b.eps)
            kernel = chip_kernel(self.family, norm.layer_norm)
        elif kind == "InstanceNorm":
            record, kernel = norm.InstanceNorm(b.eps), norm.instance_norm
        elif kind == "GroupNorm":
            record, kernel = norm.GroupNorm(b.count, b.eps), norm.group_norm
        elif kind == "BatchNorm":
            relu = Relu()
            if b.flags & 1:
                relu = Relu(True, None if math.isnan(b.relu_limit) else b.relu_limit)
            record, kernel = norm.BatchNorm(b.eps, relu), norm.batch_norm
        else:
            record = norm.LRN(b.count, b.eps, b.beta, b.bias)
            kernel = chip_kernel(self.family, norm.lrn)
        return record, self._rounded(kernel), tuple(range(len(self.command.operands)))

    def _sfu(self, b: isa.SfuBlock):
        def unset(value: float) -> float | None:
            return None if math.isnan(value) else value

        record = Unary(
            isa.SFU_FUNCTIONS[b.function], unset(b.alpha), unset(b.beta), isa.SFU_OPTIONS[b.option]
        )
        return record, self._rounded(chip_kernel(self.family, unary)), (0,)


BUILDERS: dict[int, Callable] = {
    isa.TIU_LUT: EngineStep._lut,
    isa.TIU_CONV: EngineStep._conv,
    isa.TIU_MATMUL: EngineStep._matmul,
    isa.TIU_ARITH: EngineStep._arith,
    isa.TIU_CVT: EngineStep._cvt,
    isa.TIU_POOL: EngineStep._pool,
    isa.TIU_REDUCE: EngineStep._reduce,
    isa.TIU_SFU: EngineStep._sfu,
    isa.TIU_FARITH: EngineStep._farith,
    isa.TIU_NORM: EngineStep._norm,
}
"""TIU engine opcode -> (step, block) -> (library record, kernel, operand indices)."""


def engine_step(command: Command, device: Device, what: str) -> Step:
    """The step of a command: a GDMA copy, or a library call (TIU and CPU
    commands, and the GDMA commands with a builder: fill, gather)."""
    opcode = command.header.opcode
    if opcode not in isa.ENGINE_NAMES:
        raise TpucError(f"{what}: unknown opcode {opcode:#x}")
    if opcode in isa.GDMA_OPCODES and opcode not in BUILDERS:
        return CopyStep(command, device, what)
    if (command.header.opcode in isa.CPU_OPCODES) != (command.header.engine == ENGINE_CPU):
        raise TpucError(f"{what}: {isa.ENGINE_NAMES[command.header.opcode]} on the wrong engine")
    return EngineStep(command, device, what)


# builders of later opcodes live in their own modules and register into BUILDERS
from tpuc.target.runtime import engine_cpu, engine_data, engine_resize_rnn  # noqa: E402, F401
