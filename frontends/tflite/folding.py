"""Operators evaluated at conversion time instead of becoming TOP ops.

Converters (Keras, TFLiteConverter) leave shape subgraphs in a model:
`SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE` for every Flatten on a dynamic
batch, GATHER/CONCATENATION/arithmetic on shape vectors, plus fp16 or
sparse weights behind DEQUANTIZE/DENSIFY. Each such op has a small numpy
function in `FOLDERS` (registry.py, filled by fold_ops.py); `fold` runs it
when every input it reads is known: a constant, or for SHAPE the static
shape tpuc gives every tensor (from `--input_shapes`, else the file's own
shapes, where a dynamic batch is stored as 1). A shape computation that
reads data is refused in one line naming the op and the tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuc.base.errors import TpucError
from tpuc.frontends.tflite.model import DTYPES, TModel, TOperator

if TYPE_CHECKING:
    from tpuc.frontends.tflite.converter import TfliteConverter


class FoldError(TpucError):
    """A form of a foldable op the folder does not evaluate; the driver
    names the op and its tensor."""


@dataclass
class FoldArgs:
    """What a fold function reads: its op, the inputs' constant values
    (None for an absent optional input, or for SHAPE's data input) and
    shapes, the numpy dtypes of the outputs and their shapes in the file."""

    op: TOperator
    values: list[np.ndarray | None]
    shapes: list[tuple[int, ...] | None]
    out_dtypes: list[Any]
    out_shapes: list[tuple[int, ...]]

    @property
    def options(self):
        return self.op.options

    def value(self, position: int, what: str) -> np.ndarray:
        found = self.values[position] if position < len(self.values) else None
        if found is None:
            raise FoldError(f"{what} (input {position}) is missing")
        return found

    def ints(self, position: int, what: str) -> list[int]:
        return [int(v) for v in np.asarray(self.value(position, what)).reshape(-1)]


FoldFn = Callable[[FoldArgs], list[np.ndarray]]


@dataclass(frozen=True)
class Folder:
    """A fold function; `shape_only`: it reads only its first input's
    shape (SHAPE), so that input may be any tensor."""

    fn: FoldFn
    shape_only: bool = False

    def blocking_input(self, op: TOperator, known: Callable[[int], bool]) -> int | None:
        """The first input the fold needs but does not have, or None."""
        for position, index in enumerate(op.inputs):
            if index < 0 or (position == 0 and self.shape_only):
                continue
            if not known(index):
                return index
        return None


def out_dtype(tensor) -> Any:
    """The dtype a folded tensor is kept in: real values (float32) for a
    quantized or float tensor, the file's integer type otherwise."""
    if tensor.quantized:
        return np.float32
    return DTYPES.get(tensor.type, np.float32)


def fold(cv: TfliteConverter, op: TOperator, folder: Folder) -> list[np.ndarray]:
    """The constant value of each output of `op`."""
    args = FoldArgs(
        op,
        [cv.const(i) if i >= 0 else None for i in op.inputs],
        [cv.shape(i) if i >= 0 else None for i in op.inputs],
        [out_dtype(cv.tensor(o)) for o in op.outputs],
        [cv.tensor(o).shape for o in op.outputs],
    )
    try:
        results = folder.fn(args)
    except FoldError as exc:
        raise cv.error(op, f"cannot fold it: {exc}") from None
    except (ValueError, IndexError, TypeError) as exc:  # numpy's word on inconsistent operands
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise cv.error(op, f"cannot fold it: {reason}") from None
    pairs = zip(results, args.out_dtypes, strict=True)
    return [np.asarray(r).astype(d, copy=False) for r, d in pairs]


def unfoldable_error(model: TModel, op: TOperator, index: int) -> TpucError:
    """A fold-only op (a shape computation) that reads data."""
    out = model.tensor(op.outputs[0]).name if op.outputs else "?"
    return TpucError(
        f"{model.path}: operator {op.label} ('{out}'): a shape computation tpuc cannot fold: "
        f"input '{model.tensor(index).name}' is computed from the model's input data, "
        f"not from constants or shapes"
    )


def dequantize(tensor, data: np.ndarray) -> np.ndarray:
    """Real values of a constant: float16 widened, integers scaled per
    tensor or per axis."""
    if data.dtype.kind == "f":
        return data.astype(np.float32)
    if not tensor.quantized:
        return data.astype(np.float32)
    scales, zps = tensor.scales, tensor.zero_points
    if scales.size > 1:
        shape = [1] * data.ndim
        shape[tensor.quantized_dimension] = scales.size
        scales, zps = scales.reshape(shape), zps.reshape(shape)
    return ((data.astype(np.float64) - zps) * scales).astype(np.float32)


def resolve_shape(shape: Sequence[int], size: int) -> list[int]:
    """A RESHAPE target with its -1 (at most one) filled in."""
    shape = [int(d) for d in shape]
    if shape.count(-1) > 1:
        raise FoldError(f"the new shape {shape} has more than one -1")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or size % known:
            raise FoldError(f"{size} values do not fill the new shape {shape}")
        shape[shape.index(-1)] = size // known
    return shape
