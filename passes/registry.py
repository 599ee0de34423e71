"""Every pass `tpuc-opt` and the tools can run, by pipeline name.

Each entry names the module and class of a pass; nothing is imported until
a pass is looked up, so start-up stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

PASSES: dict[str, tuple[str, str]] = {
    "shape-infer": ("tpuc.passes.shape_infer", "ShapeInferPass"),
    "canonicalize": ("tpuc.passes.canonicalize", "CanonicalizePass"),
    "import-calibration-table": ("tpuc.passes.import_calibration", "ImportCalibrationTablePass"),
    "processor-assign": ("tpuc.passes.processor_assign", "ProcessorAssignPass"),
    "convert-top-to-tpu": ("tpuc.passes.lowering.convert", "ConvertTopToTpuPass"),
    "strip-io-quant": ("tpuc.passes.strip_io_quant", "StripIOQuantPass"),
    "weight-reorder": ("tpuc.passes.weight_reorder", "WeightReorderPass"),
    "subnet-divide": ("tpuc.passes.subnet_divide", "SubnetDividePass"),
    "layer-group": ("tpuc.passes.layer_group", "LayerGroupPass"),
    "address-assign": ("tpuc.passes.address_assign", "AddressAssignPass"),
    "codegen": ("tpuc.passes.codegen", "CodegenPass"),
    "cse": ("xdsl.transforms.common_subexpression_elimination", "CommonSubexpressionElimination"),
    "dce": ("xdsl.transforms.dead_code_elimination", "DeadCodeElimination"),
}
"""Pipeline name -> (module, class) of the pass."""


def _factory(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        return getattr(importlib.import_module(module), cls)

    return load


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> factory returning the pass class (imported on call)."""
    return {name: _factory(module, cls) for name, (module, cls) in PASSES.items()}


def get_pass(name: str) -> type[ModulePass]:
    """The pass class registered under `name`."""
    from tpuc.base.errors import TpucError

    factory = get_all_passes().get(name)
    if factory is None:
        raise TpucError(f"unknown pass '{name}' (known: {', '.join(sorted(PASSES))})")
    return factory()
