"""import-calibration-table: TOP_F32 → TOP_CALIBRATED.

Every tensor the network computes takes the range the calibration table
gives it, as a `!quant.calibrated<f32<min:max>>` element type: symmetric
quantization uses [-threshold, threshold] ([0, threshold] for tensors
without negative values), asymmetric the table's [min, max] clipped to
±threshold (so KL's outlier clipping still applies) and widened to contain
0 (a zero point must exist). Lowering reads
only these types, never the table. Weights keep their float types: their
scales come from the values themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.passes import ModulePass

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp
from tpuc.dialects.quant import CalibratedQuantizedType
from tpuc.passes.shape_infer import set_type

MAX_LISTED = 5


def calibrated_range(entry, asymmetric: bool) -> tuple[float, float]:
    """The [min, max] a tensor is quantized over."""
    if not asymmetric:  # TPU-MLIR: unsigned when the tensor never goes negative
        return (-entry.threshold if entry.min < 0 else 0.0), entry.threshold
    # the observed range, clipped by the searched threshold (which keeps
    # KL's outlier clipping), widened to hold 0
    low, high = max(entry.min, -entry.threshold), min(entry.max, entry.threshold)
    return min(low, 0.0), max(high, 0.0)


def _calibrated_ops(module: ModuleOp) -> list[TensorOp]:
    """Ops whose results get a range: all but weights and None values."""
    return [
        op
        for op in module.walk()
        if isinstance(op, TensorOp) and not isinstance(op, top.WeightOp | top.NoneOp)
    ]


def _missing(ops: list[TensorOp], table) -> list[str]:
    names = [name for op in ops for name in op.names]
    return [name for name in names if name not in table]


@dataclass(frozen=True)
class ImportCalibrationTablePass(ModulePass):
    """Annotate every computed tensor with its calibrated range."""

    name = "import-calibration-table"

    file: str = ""
    asymmetric: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.cali_table import read_table
        from tpuc.base.module_state import ModuleState, advance_state, require_state

        require_state(op, self.name, ModuleState.TOP_F32)
        if not self.file:
            raise TpucError(f"{self.name}: needs file=<calibration table>")
        table = read_table(self.file)
        ops = _calibrated_ops(op)
        missing = _missing(ops, table)
        if missing:
            listed = ", ".join(missing[:MAX_LISTED]) + (", …" if len(missing) > MAX_LISTED else "")
            raise TpucError(
                f"{self.file}: no entry for {len(missing)} tensor(s) of the module ({listed}); "
                "is the table from another model?"
            )
        for tensor_op in ops:
            _annotate(tensor_op, table, self.asymmetric)
        for func in op.walk():
            if isinstance(func, FuncOp):
                _update_signature(func)
        advance_state(op, ModuleState.TOP_CALIBRATED)


def _annotate(op: TensorOp, table, asymmetric: bool) -> None:
    for result, name in zip(op.results, op.names, strict=True):
        kind = result.type
        if not isinstance(kind, TensorType):
            raise TpucError(
                f"{op.name} '{name}': result has no static tensor type; run shape-infer"
            )
        low, high = calibrated_range(table.get(name), asymmetric)
        element = CalibratedQuantizedType(low, high, kind.element_type)
        set_type(result, TensorType(element, kind.get_shape()))


def _update_signature(func: FuncOp) -> None:
    """The function returns what its body now returns."""
    if isinstance(func.body.block.last_op, ReturnOp):
        func.update_function_type()
