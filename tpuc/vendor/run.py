"""Run a native bmodel in the vendor runtime on its chip model.

Inputs are real values by tensor name (quantized here when the bmodel's
input is an integer tensor, as the TPU interpreter quantizes them); outputs
come back as real values by name (dequantized with the tensor's scale and
zero point), so they compare with the TPU interpreter's directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tpuc.bmodel.model import select_stage
from tpuc.bmodel.native import NATIVE_TYPE, NativeIO, model_type, read_native_stages
from tpuc.dtypes import DTYPE_CODES, STORAGE
from tpuc.errors import TpucError
from tpuc.files import read_bytes
from tpuc.vendor.fetch import VendorPaths, locate


def _element(desc):
    """The kernel library's element type of a bmodel tensor (quantized when integer)."""
    from tpuc.kernels.element import Element

    if desc.dtype in ("f32", "f16", "bf16"):
        return Element(desc.dtype)
    info = np.iinfo(STORAGE[desc.dtype])
    return Element(desc.dtype, desc.scale, desc.zero_point, int(info.min), int(info.max))


def _to_device(desc, value: np.ndarray) -> np.ndarray:
    """Real values as the tensor stores them, quantized as the chip and the
    TPU interpreter quantize (tpuc.kernels.cast.from_real)."""
    from tpuc.dtypes import to_storage
    from tpuc.kernels.cast import from_real

    value = np.asarray(value, dtype=np.float32).reshape(desc.shape)
    return to_storage(from_real(value, _element(desc)), desc.dtype)


def _to_real(desc, stored: np.ndarray) -> np.ndarray:
    from tpuc.dtypes import from_storage
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
        from tpuc.vendor.worker import Worker

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

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs (real values, by name) for `inputs` (real values, by name)."""
        io = self.stage_for(inputs)
        args = [(DTYPE_CODES[t.dtype], _to_device(t, inputs[t.name])) for t in io.inputs]
        outs = [(DTYPE_CODES[t.dtype], t.shape, STORAGE[t.dtype]) for t in io.outputs]
        stored = self.worker.call(f"running {self.path.name}", "run", str(self.path.resolve()),
                                  io.net, args, outs)  # fmt: skip
        return {t.name: _to_real(t, s) for t, s in zip(io.outputs, stored, strict=True)}

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> NativeRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_native(
    path: str | Path, inputs: Mapping[str, np.ndarray], vendor: VendorPaths | None = None
) -> dict[str, np.ndarray]:
    """The outputs (real values, by name) of the native bmodel at `path`."""
    with NativeRunner(path, vendor) as runner:
        return runner.run(inputs)


__all__ = ["NativeRunner", "is_native", "run_native"]
