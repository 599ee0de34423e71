"""CPU subnets' commands (0x600-0x60F, engine ENGINE_CPU) in the simulator:
a host function on the kernel library, its typed block decoded into the
record the TPU interpreter builds (TPU-MLIR's cpu layers with their param
structs). Registered into `tpuc.target.runtime.engine.BUILDERS`; no IR, no
interpreter.
"""

from __future__ import annotations

from tpuc.kernels import reduce as reduce_lib
from tpuc.kernels import rounding
from tpuc.target.isa import engine as isa
from tpuc.target.runtime.engine import BUILDERS, EngineStep, element_of


def topk(step: EngineStep, b: isa.TopkBlock):
    """TopK in float32: values rounded to their record's type, indices to
    theirs (f32), as the interpreter's float kernel does."""
    if not step.is_float:
        raise ValueError("an integer TopK (CPU functions run on float values)")
    if len(step.command.operands) != 1 or len(step.command.results) != 2:
        raise ValueError("TopK takes one input and gives values and indices")
    elements = tuple(element_of(r) for r in step.command.results)

    def run(p: reduce_lib.TopK, x):
        return rounding.round_results(elements, reduce_lib.topk(p, x))

    return reduce_lib.TopK(b.axis, b.k, bool(b.largest)), run, (0,)


BUILDERS[isa.CPU_TOPK] = topk
