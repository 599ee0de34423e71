"""Run a native bmodel in the vendor runtime on its chip model.

Inputs are real values by tensor name (quantized here when the bmodel's
input is an integer tensor, as the TPU interpreter quantizes them) or, for
such an input, its stored integers; outputs come back as real values by
name (dequantized with the tensor's scale and zero point), so they compare
with the TPU interpreter's directly, or as the stored integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tpuc.base.dtypes import DTYPE_CODES, STORAGE
from tpuc.base.errors import TpucError
from tpuc.base.files import read_bytes
from tpuc.target.bmodel.model import select_stage
from tpuc.target.bmodel.native import (
    NATIVE_TYPE,
    NativeIO,
    model_type,
    read_native_io,
    read_native_stages,
)
from tpuc.target.vendor.fetch import VendorPaths, locate

QUANTIZED = ("i8", "u8")  # the bmodel dtypes that carry a scale and zero point


def _element(desc, network_input: bool = False):
    """The kernel library's element type of a bmodel tensor (quantized when
    integer; a network input's Tensor.scale is 1/S, `input_scale`)."""
    from tpuc.kernels.element import Element
    from tpuc.target.bmodel import input_scale

    if desc.dtype in ("f32", "f16", "bf16"):
        return Element(desc.dtype)
    info = np.iinfo(STORAGE[desc.dtype])
    scale = input_scale(desc.scale) if network_input else desc.scale
    return Element(desc.dtype, scale, desc.zero_point, int(info.min), int(info.max))


def to_device(desc, value: np.ndarray) -> np.ndarray:
    """An input as the tensor stores it: integer arrays of a quantized input
    as they are, real values quantized as the chip and the TPU interpreter
    quantize (tpuc.kernels.cast.stored_input, from_real)."""
    from tpuc.base.dtypes import to_storage
    from tpuc.kernels.cast import stored_input

    value = np.asarray(value).reshape(desc.shape)
    return to_storage(stored_input(value, _element(desc, True), desc.name), desc.dtype)


def _to_real(desc, stored: np.ndarray) -> np.ndarray:
    from tpuc.base.dtypes import from_storage
    from tpuc.kernels.cast import to_real

    return np.asarray(to_real(from_storage(stored, desc.dtype), _element(desc)), np.float32)


def is_native(path: str | Path) -> bool:
    """Whether the bmodel file at `path` holds the chip's own command streams."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return model_type(head) == NATIVE_TYPE


class NativeRunner:
    """A native bmodel and a vendor runtime worker, for one or many runs."""

    def __init__(self, path: str | Path, vendor: VendorPaths | None = None):
        from tpuc.target.vendor.worker import Worker

        data = read_bytes(path, "bmodel file")
        if model_type(data) != NATIVE_TYPE:
            raise TpucError(f"{path}: not a native bmodel (it is for tpuc's device simulator)")
        self.path = Path(path)
        vendor = vendor or locate()
        self.stages = read_native_stages(data, vendor.bmodel_fbs, str(path))
        self.io = self.stages[0]  # the first stage: what a caller without inputs sees
        self.worker = Worker("runtime", vendor.lib, "vendor runtime")

    def stage_for(self, inputs: Mapping[str, np.ndarray]) -> NativeIO:
        """The stage whose input shapes are the inputs' (the vendor runtime
        launches a combined bmodel's net in the stage of the given shapes)."""
        missing = [t.name for t in self.io.inputs if t.name not in inputs]
        if missing:
            raise TpucError(f"{self.path}: no value for input(s) {', '.join(missing)}")
        stages = [[(t.name, t.shape) for t in io.inputs] for io in self.stages]
        given = {name: np.shape(value) for name, value in inputs.items()}
        return self.stages[select_stage(stages, given, str(self.path))]

    def run(self, inputs: Mapping[str, np.ndarray], fixed: bool = False) -> dict[str, np.ndarray]:
        """The outputs by name for `inputs` (real values, or the stored
        integers of a quantized input): real values, or with `fixed` the
        stored integers of quantized outputs (in their own dtype)."""
        io = self.stage_for(inputs)
        args = [(DTYPE_CODES[t.dtype], to_device(t, inputs[t.name])) for t in io.inputs]
        outs = [(DTYPE_CODES[t.dtype], t.shape, STORAGE[t.dtype]) for t in io.outputs]
        stored = self.worker.call(f"running {self.path.name}", "run", str(self.path.resolve()),
                                  io.net, args, outs)  # fmt: skip
        return {
            t.name: s if fixed and t.dtype in QUANTIZED else _to_real(t, s)
            for t, s in zip(io.outputs, stored, strict=True)
        }

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> NativeRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_native(
    path: str | Path,
    inputs: Mapping[str, np.ndarray],
    vendor: VendorPaths | None = None,
    fixed: bool = False,
) -> dict[str, np.ndarray]:
    """The outputs of the native bmodel at `path` by name (see `NativeRunner.run`)."""
    with NativeRunner(path, vendor) as runner:
        return runner.run(inputs, fixed)


def bmodel_inputs(path: str | Path) -> list:
    """The network inputs (TensorDesc) of a bmodel of either kind: tpuc's
    own or native (read with the vendor's schema)."""
    from tpuc.target.bmodel import read_bmodel

    data = read_bytes(path, "bmodel file")
    if model_type(data) == NATIVE_TYPE:
        return list(read_native_io(data, locate().bmodel_fbs, str(path)).inputs)
    return list(read_bmodel(data, str(path)).nets[0].parameters[0].inputs)


__all__ = ["NativeRunner", "bmodel_inputs", "is_native", "run_native", "to_device"]
