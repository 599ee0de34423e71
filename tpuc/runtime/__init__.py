"""tpuc's device simulator: runs a bmodel file alone (no MLIR, no npz).

`load_bmodel(path)` checks the file and loads it into a simulated device of
the chip's global-memory size; `Program.run(inputs)` executes the command
streams with the TPU interpreter's kernels and returns the outputs.
"""

from tpuc.runtime.program import Program, load_bmodel

__all__ = ["Program", "load_bmodel"]
