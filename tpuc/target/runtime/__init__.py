"""tpuc's device simulator: runs a bmodel file alone (no MLIR, no npz).

`load_bmodel(path)` checks the file and loads it into a simulated device of
the chip's global-memory size; `Program.run(inputs)` executes the command
streams with the TPU interpreter's kernels and returns the outputs.
`estimate(model)` (tpuc.target.runtime.profile) gives the bmodel's estimated
cycles and per-command timeline on its chip from the command streams alone.
"""

from tpuc.target.runtime.profile import Profile, estimate
from tpuc.target.runtime.program import Program, load_bmodel

__all__ = ["Profile", "Program", "estimate", "load_bmodel"]
