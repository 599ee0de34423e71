"""codegen: a TPU_ADDRESSED module -> tpuc instruction streams -> a bmodel.

`compile_bmodel` is model_deploy's whole back end: weight-reorder,
subnet-divide and address-assign on the lowered module, then the bmodel's
bytes and the tensor locations (TPU-MLIR's tensor_location.json rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp


@dataclass
class Compiled:
    module: ModuleOp  # TPU_ADDRESSED: the `_final.mlir`
    store: dict  # its weights (reordered)
    bmodel: bytes
    locations: dict  # tensor_location.json: chip, net, tensors (rows)


def compile_bmodel(module: ModuleOp, store: dict, chip: str) -> Compiled:
    """Finalize a TPU_LOWERED module in place (its store is copied, not
    changed) and generate the bmodel."""
    from tpuc.bmodel import write_bmodel
    from tpuc.passes.codegen.bmodel_builder import build_bmodel, tensor_locations
    from tpuc.passes.finalize import finalize
    from tpuc.weights import WeightStore

    final_store = WeightStore(store)
    finalize(module, final_store, chip)
    bmodel = build_bmodel(module, chip)
    locations = {
        "chip": bmodel.chip,
        "net": bmodel.nets[0].name,
        "tensors": tensor_locations(module),
    }
    return Compiled(module, final_store, write_bmodel(bmodel), locations)
