"""codegen: a TPU_ADDRESSED module -> tpuc instruction streams -> a bmodel.

`CodegenPass` (pipeline name `codegen`, the last stage of `tpuc.workflow.pipeline`)
builds the bmodel's bytes and the tensor locations (TPU-MLIR's
tensor_location.json rows) and leaves the module unchanged. The result is
kept beside the module (`generated(module)`), like its weights, and written
to `output` / `locations` when those options are given, so `tpuc-opt` and
lit tests reach codegen as they reach every other pass.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tpuc.base.errors import TpucError


@dataclass(frozen=True)
class Generated:
    """What codegen made of a module."""

    bmodel: bytes
    locations: dict  # tensor_location.json without the bmodel's file name: chip, net, tensors


_GENERATED: weakref.WeakKeyDictionary[ModuleOp, Generated] = weakref.WeakKeyDictionary()


def generated(module: ModuleOp) -> Generated:
    """The bmodel codegen made of `module` (codegen must have run on it)."""
    result = _GENERATED.get(module)
    if result is None:
        raise TpucError("codegen has not run on this module")
    return result


def locations_text(bmodel_name: str, locations: dict) -> str:
    """tensor_location.json, as model_deploy.py writes it next to the bmodel."""
    return json.dumps({"bmodel": bmodel_name, **locations}, indent=1) + "\n"


def generate(module: ModuleOp, chip: str = "") -> Generated:
    """The bmodel bytes and tensor locations of an addressed module (weights attached)."""
    from tpuc.passes.codegen.bmodel_builder import build_bmodel, tensor_locations
    from tpuc.target.bmodel import write_bmodel

    bmodel = build_bmodel(module, chip or None)
    locations = {
        "chip": bmodel.chip,
        "net": bmodel.nets[0].name,
        "tensors": tensor_locations(module),
    }
    return Generated(write_bmodel(bmodel), locations)


@dataclass(frozen=True)
class CodegenPass(ModulePass):
    """Generate the bmodel of a TPU_ADDRESSED module; the module is not changed.

    `output`: write the bmodel there; `locations`: write tensor_location.json
    there; `chip` defaults to module.chip."""

    name = "codegen"

    output: str = ""
    locations: str = ""
    chip: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.files import OutputSet

        result = _GENERATED[op] = generate(op, self.chip)
        if not (self.output or self.locations):
            return
        with OutputSet() as out:
            if self.output:
                out.write_bytes(self.output, result.bmodel)
            if self.locations:
                name = Path(self.output).name if self.output else ""
                out.write_text(self.locations, locations_text(name, result.locations))


__all__ = ["CodegenPass", "Generated", "generate", "generated", "locations_text"]
