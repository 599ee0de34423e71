"""Native codegen: a TPU_ADDRESSED module -> the chip's command streams -> a bmodel.

Every op's call is built first, in this process; an op the native target
cannot express is collected, and all of them are reported in one error
before the vendor library is started or anything is written. The calls
then go, in program order, to the backend library in its worker
(`tpuc.target.vendor.worker`), which returns the command groups and the library's
own cycle count for the subnet. The bmodel follows the vendor schema
(`tpuc.target.bmodel.native`) and embeds the vendor's kernel module, as TPU-MLIR
does: the chip model runs without it, but a board loads the kernels of some
ops from it, and a bmodel meant for a board must not depend on which ops
happen to need it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.base.module_state import ModuleState, require_state
from tpuc.dialects import top, tpu
from tpuc.ir.core import main_function
from tpuc.ir.module_io import module_attr
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, dtype_name
from tpuc.passes.native.context import quant_of as _quant_of
from tpuc.passes.native.rules import load_rules
from tpuc.passes.subnet_divide import subnet_of
from tpuc.target.bmodel import CmdGroup, Location, TensorDesc, bmodel_time, input_scale
from tpuc.target.bmodel.native import NativeModel, NativeNet, encode_native
from tpuc.target.vendor.fetch import VendorPaths

SKIPPED = (top.InputOp, top.WeightOp, top.NoneOp, func.ReturnOp)


@dataclass(frozen=True)
class NativeGenerated:
    """A native bmodel and what the vendor library said of it."""

    bmodel: bytes
    cycles: int  # the library's total cycles (1 GHz), 0 without profiling
    profile: str  # compiler_profile_0.txt: every command with its cycles


def _label(op: Operation) -> str:
    names = getattr(op, "names", None)
    return f"'{names[0]}'" if names else "(unnamed)"


def _types(op: Operation) -> str:
    ins = ", ".join(
        str(v.type.element_type) for v in op.operands if hasattr(v.type, "element_type")
    )
    outs = ", ".join(str(v.type.element_type) for v in op.results)
    return f"({ins}) -> ({outs})"


@dataclass(frozen=True)
class GroupCall:
    """A layer group's commands (tpuc.passes.native.local.emit), sent in one message."""

    commands: list[tuple]
    label: str


def build_calls(module: ModuleOp, ctx: NativeContext, groups: Sequence = ()
                ) -> list[tuple[Operation, list[NativeCall] | GroupCall]]:  # fmt: skip
    """Every op's calls, a layer group's commands at its first op (`groups`:
    GroupPlans); raises one error listing all ops that cannot be expressed."""
    from tpuc.passes.native.local.emit import group_commands

    rules = load_rules()
    modes = list(module_attr(module, "subnet_modes", ["TPU"]))
    planned, refused = [], []
    starts = {id(plan.ops[0].op): plan for plan in groups}
    grouped = {id(lop.op) for plan in groups for lop in plan.ops}
    for op in main_function(module).body.block.ops:
        if isinstance(op, SKIPPED):
            continue
        if id(op) in starts:
            plan = starts[id(op)]
            label = "the layer group of " + ", ".join(_label(lop.op) for lop in plan.ops)
            planned.append((op, GroupCall(group_commands(plan, ctx), label)))
        if id(op) in grouped:
            continue
        rule = rules.get(type(op))
        try:
            subnet = subnet_of(op)
            if subnet is not None and subnet < len(modes) and modes[subnet] == "CPU":
                raise NotExpressible("runs on the host CPU (a CPU subnet)")
            if rule is None:
                raise NotExpressible("no native rule")
            planned.append((op, rule(op, ctx)))
        except NotExpressible as exc:
            refused.append(f"{op.name} {_label(op)} {_types(op)}: {exc}")
    if refused:
        shown = "; ".join(refused[:12]) + (
            f"; … ({len(refused)} in all)" if len(refused) > 12 else ""
        )
        raise TpucError(f"the native target cannot express {len(refused)} op(s): {shown}")
    return planned


def _tensor(ctx: NativeContext, value: SSAValue, name: str) -> TensorDesc:
    from tpuc.passes.address_assign import tensor_bytes

    quant = _quant_of(value)
    shape = value.type.get_shape()
    scale = quant.scale if quant is not None else 1.0
    if quant is not None and isinstance(value.owner, top.InputOp):
        scale = input_scale(scale)  # TPU-MLIR's convention for a network input: 1/S
    return TensorDesc(
        name,
        dtype_name(value),
        shape,
        ctx.address(value),
        tensor_bytes(value),
        scale,
        quant.zero_point if quant is not None else 0,
    )


def _io(module: ModuleOp, ctx: NativeContext) -> tuple[list[TensorDesc], list[TensorDesc]]:
    body = main_function(module).body.block
    inputs = [
        _tensor(ctx, op.results[0], op.names[0]) for op in body.ops if isinstance(op, top.InputOp)
    ]
    ret = body.last_op
    assert isinstance(ret, func.ReturnOp)
    outputs = [_tensor(ctx, v, v.owner.names[v.index]) for v in ret.operands]
    return inputs, outputs


def run_backend(vendor: VendorPaths, planned, profile: bool = True) -> dict:
    """The calls through the backend library; its groups, cycles and profile."""
    from tpuc.target.vendor.params import check_params
    from tpuc.target.vendor.worker import Worker

    check_params(vendor.param_h)
    with Worker("backend", vendor.lib, "vendor backend") as worker:
        worker.call("starting a subnet", "begin", profile)
        for op, calls in planned:
            if isinstance(calls, GroupCall):
                worker.call(calls.label, "run", calls.commands)
                continue
            what = f"{op.name} {_label(op)}"
            name = getattr(op, "names", ["op"])[0]
            for call in calls:
                if call.move or call.cw:
                    method = "general_move" if call.move else "cw_transpose"
                    worker.call(what, method, name, call.move or call.cw)
                    continue
                method = "call_plain" if call.plain else "call_global"
                worker.call(what, method, name, call.function, call.param, call.pointers,
                            call.inputs, call.outputs)  # fmt: skip
        return worker.call("finishing the subnet", "end")


def generate_native(module: ModuleOp, vendor: VendorPaths, profile: bool = True,
                    groups: Sequence = ()) -> NativeGenerated:  # fmt: skip
    """The native bmodel of a TPU_ADDRESSED bm1684x module (weights attached);
    `groups` (GroupPlans over its ops) run as layer groups in local memory,
    and so does every tpu.Group of the module (`local.groups`)."""
    require_state(module, "native codegen", ModuleState.TPU_ADDRESSED)
    chip = str(module_attr(module, "chip", "")).upper()
    if chip != "BM1684X":
        raise TpucError(f"the native target writes bm1684x bmodels; this module is for {chip}")
    if any(isinstance(op, tpu.GroupOp) for op in main_function(module).body.block.ops):
        from tpuc.passes.native.local.groups import native_group_plans

        module, plans = native_group_plans(module, vendor)  # a copy, the groups' ops in line
        groups = [*groups, *plans]
    sizing = NativeContext(module)
    build_calls(module, sizing, groups)
    ctx = NativeContext(module, len(sizing.coeffs.blob))
    planned = build_calls(module, ctx, groups)
    inputs, outputs = _io(module, ctx)
    result = run_backend(vendor, planned, profile)
    groups = [
        CmdGroup(g["tiu"], g["gdma"], g["tiu_num"], g["gdma_num"], len(g["tiu"]), len(g["gdma"]))
        for g in result["groups"]
    ]
    net = NativeNet(
        str(module_attr(module, "name", "net")),
        inputs,
        outputs,
        ctx.ctx_addr,
        ctx.ctx_size,
        ctx.coeffs.base,
        bytes(ctx.coeffs.blob),
        groups,
        [Location(*loc) for loc in ctx.coeffs.locations],
    )
    kernel = vendor.kernel_module
    model = NativeModel(
        "BM1684X",
        [net],
        bmodel_time(),
        neuron_size=ctx.ctx_size,  # the runtime's context buffer
        kernel_module=(kernel.name, kernel.read_bytes()),
    )
    return NativeGenerated(
        encode_native(model, vendor.bmodel_fbs), result["cycles"], result["profile"]
    )


__all__ = ["GroupCall", "NativeGenerated", "build_calls", "generate_native", "run_backend"]
