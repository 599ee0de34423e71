"""The TPU interpreter: runs `func @main` of a TPU module with the chip's arithmetic.

It is the TOP interpreter (same walk, memory reuse and error reporting) with
two differences: kernels come from `TPU_KERNELS` by (op class, kind), kind
"int" for a quantized result, "float" otherwise; and each value is held as
the chip holds it (see dialects/tpu/ops.py): float32 arrays of f16/bf16
values, or of the STORED integers q of quantized tensors. Weights are decoded
from the npz by their declared element type; `real_values` turns outputs
back into real numbers S·(q − Z).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    ModuleOp,
)
from xdsl.ir import Attribute

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.top_interpreter import TopInterpreter, fit_weight
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.tpu_ops import TPU_KERNELS
from tpuc.interp.tpu_ops.cast_ops import from_real, to_real
from tpuc.interp.tpu_ops.float_ops import rounded
from tpuc.interp.tpu_ops.params import element_record
from tpuc.ir.core import element_of, inline_weight, int_width, kind_of
from tpuc.kernels.cast import stored_input
from tpuc.kernels.executor import Executor


def decode_weight(name: str, element: Attribute, raw: np.ndarray) -> np.ndarray:
    """npz data -> the interpreter's arrays: 8/16-bit integers as float32,
    wider integers (i32 biases) as float64 (exact), f16 (float16 arrays) and
    bf16 (uint16 bit patterns) as float32, f32 as float32."""
    raw = np.asarray(raw)
    width = int_width(element)
    if width is not None:
        if raw.dtype.kind not in "iub":
            raise TpucError(f"weight '{name}' is declared {element} but holds {raw.dtype} data")
        return raw.astype(np.float32 if width <= 16 else np.float64)
    if isinstance(element, Float16Type):
        if raw.dtype != np.float16:
            raise TpucError(f"weight '{name}' is declared f16 but holds {raw.dtype}, not float16")
        return raw.astype(np.float32)
    if isinstance(element, BFloat16Type):
        if raw.dtype != np.uint16:
            raise TpucError(
                f"weight '{name}' is declared bf16 but holds {raw.dtype}, not uint16 bit patterns"
            )
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.asarray(raw, dtype=np.float32)


def tpu_kernel_for(op, kind: str):
    """The kernel of a TPU module's op (see `tpu_kernel_of`)."""
    return tpu_kernel_of(type(op), kind)


def tpu_kernel_of(op_class: type, kind: str):
    """The kernel of an op class in a TPU module: TPU_KERNELS by (class,
    kind), or a TOP op in float by its TOP kernel rounded to its type
    (None: none)."""
    fn = TPU_KERNELS.get((op_class, kind))
    if fn is None and kind == "float" and op_class in KERNELS:
        fn = rounded(KERNELS[op_class])
    return fn


class TpuInterpreter(TopInterpreter):
    """A TPU module prepared for repeated runs; `run` returns stored values
    (see the module docstring), `real_values` their real meaning."""

    title = "TPU interpreter"  # stored values, exact kernels: never the accelerator

    def __init__(
        self, module: ModuleOp, threads: int | None = None, executor: Executor | None = None
    ):
        super().__init__(module, threads, executor=executor)
        self.elements: dict[str, Attribute] = {}  # tensor name -> element type
        for step in self.steps:
            for name, value in zip(step.names, step.results, strict=True):
                self.elements[name] = element_of(value)

    def _bind_kernels(self) -> None:
        """TPU_KERNELS by (class, kind); a TOP op in float falls back to its
        TOP kernel (rounded to its type). One error lists every op without."""
        missing: dict[str, None] = {}
        for step in self.steps:
            if step.leaf:
                continue
            op, kind = step.op, kind_of(step.op)
            fn = tpu_kernel_for(op, kind)
            if fn is None:
                missing[f"{op.name} ({kind})"] = None
            step.kernel = fn
        if missing:
            raise TpucError(f"the TPU interpreter has no kernel for: {', '.join(sorted(missing))}")

    def _execute(self, step, env, weights, inputs):
        """A step with float overflow raised: a finite value the chip's type
        cannot hold (a dequantized 3.4e38 threshold, a requant that leaves
        float32) is an error naming the op, never a numpy warning and an inf
        that the steps after it turn into silently wrong values. (Float
        kernels that overflow as the chip does, to inf, say so themselves.)"""
        with np.errstate(over="raise"):
            return super()._execute(step, env, weights, inputs)

    @staticmethod
    def _weight(op: top.WeightOp, expected, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        name = op.names[0]
        element = element_of(op.results[0])
        raw = inline_weight(op, element)
        if raw is None:
            if name not in weights:
                raise TpucError(f"weight '{name}' is missing from the weight file")
            raw = weights[name]
        return fit_weight(name, decode_weight(name, element, raw), expected)

    @staticmethod
    def _input(op: top.InputOp, expected, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Real input values, stored in the input's type (normally f32); an
        input kept quantized (strip-io-quant) also takes its stored integers
        as an integer array, as the bmodel does."""
        array = TopInterpreter._input(op, expected, inputs)
        element = element_of(op.results[0])
        given = np.asarray(inputs[op.names[0]])
        if isinstance(element, UniformQuantizedType) and given.dtype.kind in "iu":
            return stored_input(given.reshape(array.shape), element_record(element), op.names[0])
        return from_real(array, element)

    def real_values(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs of `run` as real float32 values: S·(q − Z) for quantized
        tensors (by their IR types), float tensors as they are."""
        real = {}
        for name, array in outputs.items():
            element = self.elements.get(name)
            if isinstance(element, UniformQuantizedType):
                try:
                    with np.errstate(over="raise"):
                        real[name] = to_real(array, element)
                except FloatingPointError:
                    raise TpucError(
                        f"tensor '{name}': its values overflow float32 when dequantized "
                        "(its calibrated range is not one of real values)"
                    ) from None
            else:
                real[name] = np.asarray(array, np.float32)
        return real


def run_tpu(
    module: ModuleOp,
    weights: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    dump_all: bool = False,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Run `func @main` of a TPU module; return REAL values by tensor name
    (quantized tensors dequantized; with `dump_all`, every tensor)."""
    interpreter = TpuInterpreter(module)
    outputs = interpreter.run(weights, inputs, dump_all=dump_all, progress=progress)
    return interpreter.real_values(outputs)
