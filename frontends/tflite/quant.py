"""A pre-quantized TFLite model's own quantization as a calibration table.

The TOP module of an INT8 TFLite model is float like any other (integer
weights dequantized with their scales, QUANTIZE/DEQUANTIZE the identity on
real values); the model's scales and zero points become the calibration
table model_transform writes next to it (`module.cali_table`), so that
`model_deploy.py --quantize INT8` needs no run_calibration. Each activation
quantized with scale s and zero point zp over [qmin, qmax] gets the range
[(qmin - zp)·s, (qmax - zp)·s], which tpuc's asymmetric INT8 maps back to the
same s and zp; the value before a fused activation TOP keeps as its own op
takes the output's range (TFLite clamps in the output's quantization); a
tensor tpuc adds (a layout permute) or a canonicalized op
whose name no TFLite tensor has takes the range of its first operand.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from tpuc.base.cali_table import CaliEntry, CaliTable
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp

STORAGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}


def tensor_ranges(cv) -> dict[str, tuple[float, float]]:
    """TOP tensor name -> real range, for the values that stand for a
    per-tensor quantized TFLite activation."""
    out: dict[str, tuple[float, float]] = {}
    for table in (cv.values, cv.nhwc_values, cv.pre_act):
        for index, value in table.items():
            t = cv.model.tensor(index)
            storage = STORAGE.get(t.type_name)
            if storage is None or not t.quantized or t.scales.size != 1 or t.data is not None:
                continue
            owner = value.owner
            if not isinstance(owner, TensorOp):
                continue
            name = owner.names[value.index]
            scale, zp = float(t.scales[0]), int(t.zero_points[0])
            out[name] = ((storage[0] - zp) * scale, (storage[1] - zp) * scale)
    return out


def calibration_table(module: ModuleOp, ranges: dict[str, tuple[float, float]]) -> CaliTable:
    """An entry for every computed tensor of `module` (after canonicalize)."""
    table = CaliTable()
    ops = [
        op
        for op in module.walk()
        if isinstance(op, TensorOp) and not isinstance(op, top.WeightOp | top.NoneOp)
    ]
    for op in ops:
        inherited = _first_operand(op, table)
        for name in op.names:
            found = ranges.get(name, inherited)
            if found is not None:
                table.entries[name] = _entry(*found)
    for op in reversed(ops):  # a float graph input: the range of what reads it
        for result, name in zip(op.results, op.names, strict=True):
            if name in table.entries:
                continue
            for use in result.uses:
                user = use.operation
                if isinstance(user, TensorOp) and user.names[0] in table.entries:
                    table.entries[name] = table.entries[user.names[0]]
                    break
    order = {name: i for i, name in enumerate(n for op in ops for n in op.names)}
    table.entries = dict(sorted(table.entries.items(), key=lambda kv: order[kv[0]]))
    return table


def _entry(lo: float, hi: float) -> CaliEntry:
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    return CaliEntry(max(-lo, hi), lo, hi)


def _first_operand(op: TensorOp, table: CaliTable) -> tuple[float, float] | None:
    for operand in op.operands:
        owner = operand.owner
        if isinstance(owner, TensorOp) and not isinstance(owner, top.WeightOp):
            entry = table.entries.get(owner.names[operand.index])
            if entry is not None:
                return entry.min, entry.max
    return None
