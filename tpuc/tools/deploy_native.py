"""model_deploy.py's native target (`--codegen native`): the chip's own
command streams through the vendor backend library, the vendor library's
cycle count as the latency, and the bmodel run in the vendor runtime
against the TPU interpreter (integer outputs bit for bit, float outputs to
a cosine of at least FLOAT_COSINE: the chip's float units round in their
own order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpuc.base.errors import TpucError

FLOAT_COSINE = 0.99999
ISLAND_COSINE = 0.999  # INT8 networks with float ops: a last-bit difference there can flip a
# later quantization step, so differences grow past the float modes' bound
TARGETS = {
    "tpuc": "tpuc's own instruction set (runs in tpuc's device simulator; no board runs it)",
    "native": "the chip's own command streams, written by the vendor backend library "
    "(runs in the vendor runtime and on a board)",
}


def native_vendor(chip: str):
    """The vendor component for `--codegen native`, checked before any work."""
    from tpuc.target.vendor.fetch import locate

    if chip != "bm1684x":
        raise TpucError(f"--codegen native: the native target writes bm1684x bmodels, not {chip}")
    return locate()


@dataclass
class NativeCompiled:
    module: object  # TPU_ADDRESSED (tpuc's addresses; the native plan is derived from them)
    store: dict
    bmodel: bytes  # the chip's command streams (tpuc.target.bmodel.native)
    cycles: int  # the vendor library's estimate for the whole net (1 GHz)
    profile: str  # its per-command profile (compiler_profile_0.txt)


def native_codegen(module, store, chip: str, vendor, opt: int = 2,
                   disable_layer_group: bool = False) -> NativeCompiled:  # fmt: skip
    """finalize with layer groups planned on the vendor's cycles (or every
    op a global layer), then native codegen through the vendor backend library."""
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.passes.native.emit import generate_native
    from tpuc.workflow.pipeline import finalize

    final_store = WeightStore(store)
    if disable_layer_group:
        finalize(module, final_store, chip, disable_layer_group=True)
    else:
        finalize_grouped(module, final_store, chip, opt, vendor)
    attach_weights(module, final_store)
    result = generate_native(module, vendor)
    return NativeCompiled(module, final_store, result.bmodel, result.cycles, result.profile)


def finalize_grouped(module, store, chip: str, opt: int, vendor) -> None:
    """weight-reorder, subnet-divide, a pooled fc as a 1x1 convolution
    (tpuc.passes.native.local.fc_conv), narrow elementwise chains spread over
    the lanes (tpuc.passes.native.local.spread), the layer-group search
    priced by the vendor library (tpuc.passes.native.local.groups),
    address-assign."""
    from tpuc.ir.weights import attach_weights
    from tpuc.passes.finalize import module_chip
    from tpuc.passes.native.local.emit import GroupPricer
    from tpuc.passes.native.local.fc_conv import fc_as_local_conv
    from tpuc.passes.native.local.groups import plan_native_groups
    from tpuc.passes.native.local.spread import spread_narrow
    from tpuc.passes.registry import get_pass
    from tpuc.workflow.pipeline import run_passes

    found = module_chip(module, "finalize", chip)
    attach_weights(module, store)
    run_passes(module, [get_pass("weight-reorder")(), get_pass("subnet-divide")(chip=chip)])
    fc_as_local_conv(module, store)
    spread_narrow(module)
    with GroupPricer(vendor) as pricer:
        plan_native_groups(module, found, opt, pricer)
    run_passes(module, [get_pass("address-assign")(chip=chip)])


def latency_line(cycles: int) -> str:
    """The vendor library's own estimate (its profile's total, 1 cycle = 1 ns)."""
    return f"{cycles / 1000:.1f} µs on bm1684x ({cycles:,} cycles, the vendor library's estimate)"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    norm = np.linalg.norm(a64) * np.linalg.norm(b64)
    if norm == 0:
        return 1.0 if np.array_equal(a64, b64) else 0.0
    return float(a64 @ b64 / norm)


def chip_exact(op) -> bool:
    """Whether the TPU interpreter computes this float op as the chip does,
    bit for bit: a softmax (not a log-softmax), an LRN, a LayerNorm and an
    f32 pooling (`tpuc.kernels.chip_float`), and an INT8 conv or matmul with
    a float epilogue (`tpuc.passes.native.epilogue`)."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.context import quant_of

    if isinstance(op, tpu.LRNOp | tpu.LayerNormOp | tpu.Pool2DOp):
        return True
    if isinstance(op, tpu.Conv2DOp | tpu.MatMulOp):
        return quant_of(op.operands[0]) is not None
    return isinstance(op, tpu.SoftmaxOp) and not op.value("log")


def _layers(ops, group_class):
    """The ops in order, a layer group's own layers in its place (a group
    that stores a dequantized f32 result computes nothing in float)."""
    for op in ops:
        if isinstance(op, group_class):
            yield from op.layers()
        else:
            yield op


def float_ops(module) -> list[str]:
    """Ops of an INT8 module that compute in float (not casts, not the ops
    `chip_exact` names): the chip's float units round in their own order, so
    they cannot match bit for bit."""
    from tpuc.dialects import top, tpu
    from tpuc.dialects.tpu.group import GroupOp
    from tpuc.ir.core import main_function
    from tpuc.passes.native.context import is_float

    found = []
    for op in _layers(main_function(module).body.block.ops, GroupOp):
        if isinstance(op, tpu.CastOp | top.InputOp | top.WeightOp | top.NoneOp) or chip_exact(op):
            continue
        if op.results and hasattr(op.results[0].type, "element_type") and is_float(op.results[0]):
            found.append(f"{op.name} '{op.names[0]}'")
    return found


def check_kind(mode: str, mixed: bool, module) -> tuple[float | None, str]:
    """How the vendor runtime's outputs must match the TPU interpreter's:
    (None, bit for bit) for an INT8 network without float ops, else (the
    cosine bound, its description)."""
    if mode != "INT8" or mixed:
        return FLOAT_COSINE, f"cosine >= {FLOAT_COSINE}"
    islands = float_ops(module) if module is not None else []
    if not islands:
        return None, "bit for bit"
    shown = ", ".join(islands[:3]) + (", …" if len(islands) > 3 else "")
    return ISLAND_COSINE, f"cosine >= {ISLAND_COSINE}: {len(islands)} float op(s) ({shown})"


def native_differences(
    outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], cosine_bound
) -> list[str]:
    """One phrase per output that misses its mark: bit for bit when
    `cosine_bound` is None, else that cosine."""
    from tpuc.target.runtime.check import differences

    if cosine_bound is None:
        return differences(outputs, expected)
    found = []
    for name, array in outputs.items():
        want = expected.get(name)
        if want is None or np.shape(want) != np.shape(array):
            found.extend(differences({name: array}, expected))
            continue
        cos = cosine(np.asarray(array), np.asarray(want))
        if not cos >= cosine_bound:
            found.append(f"'{name}' has cosine {cos:.7f} (below {cosine_bound})")
    return found


def run_native_check(bmodel: bytes, inputs, vendor, fixed: bool = False) -> dict[str, np.ndarray]:
    """The bmodel's outputs in the vendor runtime (it loads files: a
    temporary one); `fixed`: quantized outputs as their stored integers."""
    import tempfile

    from tpuc.target.vendor.run import run_native

    with tempfile.TemporaryDirectory(prefix="tpuc-native-") as folder:
        path = Path(folder) / "model.bmodel"
        path.write_bytes(bmodel)
        return run_native(path, inputs, vendor, fixed)


__all__ = [
    "FLOAT_COSINE",
    "ISLAND_COSINE",
    "check_kind",
    "float_ops",
    "TARGETS",
    "latency_line",
    "native_codegen",
    "native_differences",
    "native_vendor",
    "run_native_check",
]
