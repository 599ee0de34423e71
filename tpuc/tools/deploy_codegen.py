"""model_deploy's back half: the finalized TPU module to a bmodel for the
chosen target (tpuc's own instruction set or the chip's native command
streams), and the bmodel's run against the TPU interpreter. Both targets
share everything before this point."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from tpuc.tools.deploy_progress import say

if TYPE_CHECKING:
    from tpuc.tools.model_deploy import Loaded, Request


def compile_target(req: Request, data: Loaded, out, path, written: list[Path]):
    """The bmodel of --codegen's target, with its files added to `written`."""
    if req.codegen == "native":
        return native(req, data, out, path, written)
    compiled = codegen(req, data, out, path, written)
    say(f"layer groups: {group_summary(compiled.module)}")
    say(f"estimated latency: {estimate_latency(req, compiled.bmodel)}")
    return compiled


def codegen(req: Request, data: Loaded, out, path, written: list[Path]):
    """weight-reorder, subnet-divide, address-assign -> `_final.mlir`, then
    the bmodel (--model) and `_tensor_location.json`."""
    from tpuc.ir.module_io import save_module
    from tpuc.passes.codegen import locations_text
    from tpuc.workflow.pipeline import compile_bmodel

    group = "layer-group disabled" if req.disable_layer_group else f"layer-group opt={req.opt}"
    say(f"weight-reorder, subnet-divide, {group}, address-assign, codegen")
    compiled = compile_bmodel(data.module, data.store, req.chip, req.opt, req.disable_layer_group)
    final_mlir, final_weights = path("_final.mlir"), path("_final_weight.npz")
    save_module(out, compiled.module, final_mlir, compiled.store, final_weights)
    locations = path("_tensor_location.json")
    out.write_text(locations, locations_text(req.model.name, compiled.locations))
    out.write_bytes(req.model, compiled.bmodel)
    written += [final_mlir, final_weights, locations, req.model]
    return compiled


def native(req: Request, data: Loaded, out, path, written: list[Path]):
    """The native target: `_final.mlir`, the chip bmodel (--model) and the
    vendor library's profile `<prefix>_compiler_profile.txt`."""
    from tpuc.ir.module_io import save_module
    from tpuc.tools.deploy_native import TARGETS, latency_line, native_codegen

    group = (
        "layer-group disabled"
        if req.disable_layer_group
        else f"layer-group opt={req.opt} (priced by the vendor library)"
    )
    say(f"weight-reorder, subnet-divide, {group}, address-assign, native codegen (vendor library)")
    compiled = native_codegen(
        data.module, data.store, req.chip, req.vendor, req.opt, req.disable_layer_group
    )
    final_mlir, final_weights = path("_final.mlir"), path("_final_weight.npz")
    save_module(out, compiled.module, final_mlir, compiled.store, final_weights)
    out.write_text(path("_compiler_profile.txt"), compiled.profile)
    out.write_bytes(req.model, compiled.bmodel)
    written += [final_mlir, final_weights, path("_compiler_profile.txt"), req.model]
    say(f"wrote {req.model}: {TARGETS['native']}")
    say(f"layer groups: {group_summary(compiled.module)}")
    say(f"estimated latency: {latency_line(compiled.cycles)}")
    return compiled


def group_summary(module) -> str:
    """'3 (ops 5, 12, 2; slices n x h x w 1x1x1, 1x4x1, 1x1x1)' or 'none'."""
    from tpuc.passes.layer_group.attach import module_groups

    groups = module_groups(module)
    if not groups:
        return "none (every op a global layer)"
    ops = ", ".join(str(len(g.layers())) for g in groups)
    secs = ", ".join("x".join(map(str, g.secs)) for g in groups)
    return f"{len(groups)} (ops {ops}; slices n x h x w {secs})"


def estimate_latency(req: Request, bmodel: bytes) -> str:
    """The bmodel's run time on its chip from the cycle model (no run needed)."""
    from tpuc.target.bmodel import read_bmodel
    from tpuc.target.runtime.profile import estimate

    return estimate(read_bmodel(bmodel, str(req.model)), str(req.model)).summary()


def run_bmodel(req: Request, bmodel: bytes, inputs, expected, module=None, fixed: bool = False):
    """The bmodel in the device simulator (or, native, the vendor runtime),
    against the TPU interpreter (`fixed`: quantized outputs as their stored
    integers, --quant_output)."""
    from tpuc.target.runtime.check import BmodelCheck, check_bmodel

    if req.codegen == "native":
        from tpuc.tools.deploy_native import check_kind, native_differences, run_native_check

        say(f"running {req.model} in the vendor runtime; comparing with the TPU interpreter")
        start = time.perf_counter()
        outputs = run_native_check(bmodel, inputs, req.vendor, fixed)
        threshold, how = check_kind(req.mode, req.qtable is not None, module)
        say(f"comparing {how}")
        found = native_differences(outputs, expected, threshold)
        return BmodelCheck(outputs, found, time.perf_counter() - start)

    say(f"running {req.model} in the device simulator; comparing with the TPU interpreter")
    return check_bmodel(bmodel, str(req.model), inputs, expected, fixed)
