"""Run a freshly compiled bmodel and hold it to the TPU interpreter's outputs.

The simulator executes the interpreter's own kernels, so the outputs must
match bit for bit in every mode; any difference is a codegen, addressing or
simulator bug and is reported by tensor name with its size.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass
class BmodelCheck:
    outputs: dict[str, np.ndarray]  # real values, by output name
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.mismatches


def differences(outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> list[str]:
    """One phrase per output that is not bit-identical to `expected`."""
    found = []
    for name, array in outputs.items():
        want = expected.get(name)
        if want is None:
            found.append(f"'{name}' has no TPU interpreter value")
            continue
        a, b = np.asarray(array, np.float32), np.asarray(want, np.float32)
        if a.shape != b.shape:
            found.append(f"'{name}' has shape {list(a.shape)}, expected {list(b.shape)}")
        elif not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
            count = int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
            diff = float(np.nanmax(np.abs(a.astype(np.float64) - b)))
            found.append(f"'{name}' differs in {count}/{a.size} values (max |diff| {diff:g})")
    return found


def check_bmodel(
    data: bytes,
    source: str,
    inputs: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    out_fixed: bool = False,
) -> BmodelCheck:
    """Load `data` as the simulator loads a file, run it, compare outputs
    (`out_fixed`: quantized outputs as their stored integers)."""
    from tpuc.target.bmodel import read_bmodel
    from tpuc.target.runtime.program import Program

    start = time.perf_counter()
    program = Program(read_bmodel(data, source), source)
    outputs = program.run(inputs, out_fixed=out_fixed)
    return BmodelCheck(outputs, differences(outputs, expected), time.perf_counter() - start)
