"""Which op a bmodel command belongs to, in tests."""

from __future__ import annotations

from pathlib import Path

from tpuc.ir.core import tensor_names
from tpuc.ir.module_io import load_module
from tpuc.passes.codegen.bmodel_builder import body_ops


def layer_names(folder: Path, pattern: str = "*_final.mlir") -> dict[int, str]:
    """layer_id -> the op's (first) tensor name, from a deploy's `_final.mlir`:
    layer ids index its body. (tensor_location.json lists only the tensors
    in DDR; a layer group's internal ones live in local memory.)"""
    module, _ = load_module(next(folder.glob(pattern)))
    return {
        i: tensor_names(op)[0]
        for i, op in enumerate(body_ops(module))
        if getattr(op, "names", None)
    }


def group_move(step) -> bool:
    """A layer group's load or store of a slice (not an op's own command)."""
    from tpuc.target.isa import engine as isa

    return step.command.header.opcode in (isa.GDMA_LOAD, isa.GDMA_STORE)


def tpu_ops(folder: Path, pattern: str = "*_tpu.mlir") -> dict:
    """Tensor name -> TPU op, from a deploy's `_tpu.mlir` (the ops whose
    records a command's should equal)."""
    from tpuc.ir.core import body_ops as function_ops
    from tpuc.ir.core import main_function

    module, _ = load_module(next(folder.glob(pattern)))
    return {
        n[0]: op
        for op in function_ops(main_function(module).body.block)
        if (n := getattr(op, "names", None))
    }
