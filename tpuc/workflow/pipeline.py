"""The compiler's stages as pass pipelines, defined once.

Modelled on xDSL's Toy `compiler.py`: each named stage is a list of
registered passes, and every tool (model_transform.py, model_deploy.py,
run_qtable.py, the demo) and `tpuc-opt` run the stages from here, so the
order of passes is written in one place only.

    transform         shape-infer, canonicalize                TOP_F32 (+ module.FLOPs)
    calibrate-import  import-calibration-table                 -> TOP_CALIBRATED
    lower             processor-assign, convert-top-to-tpu,
                      canonicalize                             -> TPU_LOWERED
    finalize          weight-reorder, subnet-divide,
                      layer-group, address-assign              -> TPU_ADDRESSED
    codegen           codegen                                  -> the bmodel

Between lower and finalize, model_deploy.py --quant_input/--quant_output
runs strip-io-quant (TPU_LOWERED, unchanged; tpuc.tools.deploy_quant_io),
as TPU-MLIR runs it right before weight-reorder.

`tpuc-opt -p transform`, `-p 'lower{chip=... mode=...}'`, `-p finalize` and
`-p codegen` run a whole stage.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tpuc.passes.registry import get_pass

if TYPE_CHECKING:
    from tpuc.ir.weights import WeightStore

STAGES = ("transform", "calibrate-import", "lower", "finalize", "codegen")


def transform_passes() -> list[ModulePass]:
    """TOP_F32 as imported -> shapes inferred, canonical form."""
    return [get_pass("shape-infer")(), get_pass("canonicalize")()]


def calibrate_import_passes(
    cali_table: str | os.PathLike[str], asymmetric: bool = False
) -> list[ModulePass]:
    """TOP_F32 -> TOP_CALIBRATED (tensor types carry the thresholds)."""
    return [get_pass("import-calibration-table")(file=str(cali_table), asymmetric=asymmetric)]


def lower_passes(
    chip: str,
    mode: str,
    asymmetric: bool = False,
    qtable: str | os.PathLike[str] | None = None,
    float_epilogue: bool = True,
) -> list[ModulePass]:
    """TOP -> TPU_LOWERED for `chip` in `mode` (layers of `qtable` in theirs;
    `float_epilogue`: see ConvertTopToTpuPass)."""
    return [
        get_pass("processor-assign")(chip=chip, mode=mode),
        get_pass("convert-top-to-tpu")(
            qtable=str(qtable) if qtable is not None else "",
            asymmetric=asymmetric,
            float_epilogue=float_epilogue,
        ),
        get_pass("canonicalize")(),
    ]


def deploy_passes(
    chip: str,
    mode: str,
    asymmetric: bool = False,
    cali_table: str | os.PathLike[str] | None = None,
    qtable: str | os.PathLike[str] | None = None,
    float_epilogue: bool = True,
) -> list[ModulePass]:
    """calibrate-import (when a table is given), then lower: TOP_F32 -> TPU_LOWERED."""
    passes = calibrate_import_passes(cali_table, asymmetric) if cali_table is not None else []
    return passes + lower_passes(chip, mode, asymmetric, qtable, float_epilogue)


def finalize_passes(
    chip: str = "", opt: int = 2, disable_layer_group: bool = False
) -> list[ModulePass]:
    """TPU_LOWERED -> TPU_ADDRESSED (`chip` defaults to module.chip). layer-group
    (`opt` 1 greedy, 2 cycle-model DP; `disable_layer_group`: every op global)
    runs before address-assign, which then places only what lives in DDR."""
    return [
        get_pass("weight-reorder")(),
        get_pass("subnet-divide")(chip=chip),
        get_pass("layer-group")(opt=opt, disable=disable_layer_group, chip=chip),
        get_pass("address-assign")(chip=chip),
    ]


def codegen_passes(chip: str = "") -> list[ModulePass]:
    """TPU_ADDRESSED -> the bmodel (see `tpuc.passes.codegen.generated`)."""
    return [get_pass("codegen")(chip=chip)]


def pipeline_text(passes: Iterable[ModulePass]) -> str:
    """The passes as `tpuc-opt -p` takes them (to reproduce a run)."""
    return ",".join(str(p.pipeline_pass_spec()) for p in passes)


def run_passes(module: ModuleOp, passes: Sequence[ModulePass]) -> None:
    """Apply `passes` in order, in place, then verify the module."""
    from tpuc.ir.context import make_context

    ctx = make_context()
    for p in passes:
        p.apply(ctx, module)
    module.verify()


# --- the stages as calls -----------------------------------------------------------------


def transform(module: ModuleOp) -> None:
    """The transform stage in place (weights attached); then count FLOPs."""
    from tpuc.ir.flops import module_flops
    from tpuc.ir.module_io import set_module_attr

    run_passes(module, transform_passes())
    set_module_attr(module, "FLOPs", module_flops(module))


def finalize(
    module: ModuleOp, store: WeightStore, chip: str, opt: int = 2, disable_layer_group: bool = False
) -> None:
    """The finalize stage in place on a TPU_LOWERED module. `store` holds its
    weights: reordered and merged weights are added to it, and the ones the
    module no longer reads are removed (copy it first to keep them)."""
    from tpuc.ir.weights import attach_weights
    from tpuc.passes.finalize import module_chip

    module_chip(module, "finalize", chip)  # a wrong chip fails before any change
    attach_weights(module, store)
    run_passes(module, finalize_passes(chip, opt, disable_layer_group))


@dataclass
class Compiled:
    module: ModuleOp  # TPU_ADDRESSED: the `_final.mlir`
    store: dict  # its weights (reordered)
    bmodel: bytes
    locations: dict  # tensor_location.json: chip, net, tensors (rows)


def compile_bmodel(
    module: ModuleOp, store: dict, chip: str, opt: int = 2, disable_layer_group: bool = False
) -> Compiled:
    """finalize then codegen: model_deploy's whole back end. The module is
    changed in place; its store is copied, not changed."""
    from tpuc.ir.weights import WeightStore
    from tpuc.passes.codegen import generated

    final_store = WeightStore(store)
    finalize(module, final_store, chip, opt, disable_layer_group)
    run_passes(module, codegen_passes(chip))
    result = generated(module)
    return Compiled(module, final_store, result.bmodel, result.locations)


# --- the stages as passes, for tpuc-opt ----------------------------------------------------


@dataclass(frozen=True)
class TransformStage(ModulePass):
    """shape-infer, canonicalize."""

    name = "transform"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for p in transform_passes():
            p.apply(ctx, op)


@dataclass(frozen=True)
class LowerStage(ModulePass):
    """processor-assign, convert-top-to-tpu, canonicalize."""

    name = "lower"

    chip: str = ""
    mode: str = ""
    asymmetric: bool = False
    qtable: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for p in lower_passes(self.chip, self.mode, self.asymmetric, self.qtable or None):
            p.apply(ctx, op)


@dataclass(frozen=True)
class FinalizeStage(ModulePass):
    """weight-reorder, subnet-divide, layer-group, address-assign."""

    name = "finalize"

    chip: str = ""
    opt: int = 2
    disable_layer_group: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for p in finalize_passes(self.chip, self.opt, self.disable_layer_group):
            p.apply(ctx, op)


STAGE_PASSES: dict[str, type[ModulePass]] = {
    "transform": TransformStage,
    "lower": LowerStage,
    "finalize": FinalizeStage,
}
"""Stages that are more than one pass, by the name tpuc-opt knows them by
(calibrate-import and codegen are single registered passes)."""
