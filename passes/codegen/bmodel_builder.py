"""codegen: a TPU_ADDRESSED module and its weights -> the bmodel (tpuc.target.bmodel).

The coefficient blob is the weights laid out at their assigned addresses;
each subnet becomes a SubNet (TPU: one CmdGroup with the TIU and GDMA
streams; CPU: one CpuParam per op, holding the op's host-function command); the network's
inputs and outputs become Tensors with their addresses and quantization.
`tensor_locations` lists every tensor's address for the debug json that
model_deploy writes next to the bmodel (TPU-MLIR's tensor_location.json).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tpuc.base.dtypes import STORAGE
from tpuc.base.errors import TpucError
from tpuc.base.module_state import ModuleState, require_state
from tpuc.dialects import top
from tpuc.dialects.traits import Leaf
from tpuc.ir.core import main_function, tensor_names
from tpuc.ir.module_io import module_attr
from tpuc.ir.weights import read_weight
from tpuc.passes.address_assign import address_of
from tpuc.passes.codegen.commands import no_command, op_commands, tensor_record
from tpuc.passes.codegen.cpu_rules import cpu_commands
from tpuc.passes.codegen.groups import group_phases, op_plan
from tpuc.passes.subnet_divide import subnet_of
from tpuc.target.bmodel import (
    BModel,
    CmdGroup,
    CpuParam,
    Location,
    Net,
    NetParameter,
    SubNet,
    TensorDesc,
    bmodel_time,
    input_scale,
)
from tpuc.target.chips import Chip, get_chip
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    ENGINE_TIU,
    TENSOR_QUANTIZED,
    Command,
)


def body_ops(module: ModuleOp) -> list[Operation]:
    """func @main's ops in order, without the return (layer ids index this)."""
    return [op for op in main_function(module).body.block.ops if not isinstance(op, func.ReturnOp)]


def coefficients(module: ModuleOp, ops: Iterable[Operation]) -> tuple[bytes, list[Location]]:
    """The coefficient region's bytes, every weight at its address."""
    base = int(module_attr(module, "coeff_addr", 0))
    size = int(module_attr(module, "coeff_size", 0))
    blob = bytearray(size)
    locations = []
    for op in ops:
        if not isinstance(op, top.WeightOp):
            continue
        record = tensor_record(op.results[0], op)
        raw = np.ascontiguousarray(np.asarray(read_weight(op)).astype(STORAGE[record.dtype]))
        offset = record.addr - base
        if offset < 0 or offset + raw.nbytes > size or raw.nbytes != record.nbytes:
            raise TpucError(
                f"weight '{op.names[0]}' ({raw.nbytes} bytes at {record.addr:#x}) does not fit "
                f"the coefficient region [{base:#x}, {base + size:#x})"
            )
        blob[offset : offset + raw.nbytes] = raw.tobytes()
        locations.append(Location(op.names[0], offset, raw.nbytes))
    return bytes(blob), locations


def tensor_desc(value: SSAValue, name: str) -> TensorDesc:
    """A bmodel Tensor; a quantized network input stores 1/S (`input_scale`)."""
    record = tensor_record(value, value.owner)
    quantized = bool(record.flags & TENSOR_QUANTIZED)
    scale = (
        input_scale(record.scale)
        if quantized and isinstance(value.owner, top.InputOp)
        else record.scale
    )
    return TensorDesc(
        name,
        record.dtype,
        record.shape,
        record.addr,
        record.nbytes,
        scale,
        record.zero_point,
    )


def synced(commands: list[Command]) -> list[Command]:
    """Number each engine's commands from 1 and make each wait for the other
    engine's latest one: global layers run in program order."""
    return synced_phases([[cmd] for cmd in commands])


def synced_phases(phases: list[list[Command]]) -> list[Command]:
    """Number each engine's commands from 1; every command of a phase waits
    for the other engine's last command of the phases before it, so the two
    engines run a phase concurrently and phases one after the other (a
    global layer's commands are a phase each; a layer group's timesteps)."""
    last = {ENGINE_TIU: 0, ENGINE_GDMA: 0}
    out = []
    for phase in phases:
        before = dict(last)
        for cmd in phase:
            engine = cmd.header.engine
            other = ENGINE_GDMA if engine == ENGINE_TIU else ENGINE_TIU
            last[engine] += 1
            header = dataclasses.replace(cmd.header, cmd_id=last[engine], wait_id=before[other])
            out.append(Command(header, cmd.operands, cmd.results, cmd.params))
    return out


def cmd_group(commands: list[Command]) -> CmdGroup:
    tiu = [c for c in commands if c.header.engine == ENGINE_TIU]
    gdma = [c for c in commands if c.header.engine == ENGINE_GDMA]
    bdc, dma = b"".join(c.pack() for c in tiu), b"".join(c.pack() for c in gdma)
    return CmdGroup(bdc, dma, len(tiu), len(gdma), len(bdc), len(dma))


def tpu_phases(
    members: list[tuple[int, Operation]], groups: dict[int, list[list[Command]]]
) -> list[list[Command]]:
    """A TPU subnet's phases: a global layer's commands one by one, a layer
    group's loop (at its first op) timestep by timestep."""
    phases: list[list[Command]] = []
    emitted: set[int] = set()
    for layer_id, op in members:
        info = op_plan(op)
        if info is None:
            phases += [[c] for c in op_commands(op, layer_id)]
        elif info["group"] not in emitted:
            emitted.add(info["group"])
            phases += groups[info["group"]]
    return phases


def build_subnets(
    module: ModuleOp, ops: list[Operation], returned: list[SSAValue], chip: Chip
) -> list[SubNet]:
    modes = module_attr(module, "subnet_modes", None) or ["TPU"]
    members: dict[int, list[tuple[int, Operation]]] = {i: [] for i in range(len(modes))}
    for layer_id, op in enumerate(ops):
        if op.has_trait(Leaf):
            continue
        sid = subnet_of(op) or 0  # no subnet-divide attribute: the only subnet
        if sid not in members:
            raise TpucError(f"{op.name} '{tensor_names(op)[0]}' is in unknown subnet {sid}")
        members[sid].append((layer_id, op))
    groups = group_phases(module, ops, chip)
    subnets = []
    for sid, mode in enumerate(modes):
        inputs, outputs = boundary(members[sid], set(returned))
        subnet = SubNet(sid, mode, inputs=inputs, outputs=outputs)
        if sid + 1 < len(modes):
            subnet.next_ids = [sid + 1]
        if mode == "CPU":
            for layer_id, op in members[sid]:
                cmd = cpu_commands(op, layer_id)
                if cmd is None:
                    raise no_command(op)
                subnet.cpu_params.append(CpuParam(cmd.header.opcode, cmd.pack()))
        else:
            commands = synced_phases(tpu_phases(members[sid], groups))
            subnet.cmd_groups = [cmd_group(commands)]
        subnets.append(subnet)
    return subnets


def boundary(
    members: list[tuple[int, Operation]], returned: set[SSAValue]
) -> tuple[list[TensorDesc], list[TensorDesc]]:
    """Tensors a subnet reads from outside and writes for outside (or returns)."""
    inside = {op for _, op in members}
    reads: dict[SSAValue, None] = {}
    writes: dict[SSAValue, None] = {}
    for _, op in members:
        for value in op.operands:
            owner = value.owner
            if owner not in inside and not isinstance(owner, top.WeightOp | top.NoneOp):
                reads[value] = None
        for value in op.results:
            if value in returned or any(use.operation not in inside for use in value.uses):
                writes[value] = None
    return [_desc(v) for v in reads], [_desc(v) for v in writes]


def _desc(value: SSAValue) -> TensorDesc:
    return tensor_desc(value, tensor_names(value.owner)[value.index])


def build_bmodel(module: ModuleOp, chip: str | None = None) -> BModel:
    """The bmodel of an addressed module (weights attached)."""
    require_state(module, "codegen", ModuleState.TPU_ADDRESSED)
    chip = chip or str(module_attr(module, "chip", ""))
    ops = body_ops(module)
    coeff, locations = coefficients(module, ops)
    returned = list(main_function(module).body.block.last_op.operands)
    inputs = [_desc(op.results[0]) for op in ops if isinstance(op, top.InputOp)]
    subnets = build_subnets(module, ops, returned, get_chip(chip))
    parameter = NetParameter(
        inputs=inputs,
        outputs=[_desc(v) for v in returned],
        ctx_addr=int(module_attr(module, "neuron_addr", 0)),
        ctx_size=int(module_attr(module, "neuron_size", 0)),
        coeff_addr=int(module_attr(module, "coeff_addr", 0)),
        coeff=coeff,
        cmd_groups=[g for s in subnets for g in s.cmd_groups],
        subnets=subnets,
        coeff_locations=locations,
    )
    name = str(module_attr(module, "name", "") or "net")
    return BModel(
        chip=chip.upper(),
        nets=[Net(name, [parameter])],
        time=bmodel_time(),
        neuron_size=parameter.ctx_size,
    )


def tensor_locations(module: ModuleOp) -> list[dict]:
    """Every activation's layer id, name, address and type (the debug json);
    tensors inside a layer group live in local memory only and are not listed."""
    rows = []
    for layer_id, op in enumerate(body_ops(module)):
        if isinstance(op, top.NoneOp | top.WeightOp):
            continue
        for value, name in zip(op.results, tensor_names(op), strict=True):
            if address_of(value) is None:
                continue
            record = tensor_record(value, op)
            rows.append(
                {
                    "layer_id": layer_id,
                    "name": name,
                    "op": op.name,
                    "address": record.addr,
                    "dtype": record.dtype,
                    "shape": list(record.shape),
                    "scale": record.scale,
                    "zero_point": record.zero_point,
                    "quantized": bool(record.flags & TENSOR_QUANTIZED),
                    "subnet": (subnet_of(op) or 0) if not op.has_trait(Leaf) else None,
                }
            )
    return rows
