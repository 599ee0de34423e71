"""CPU-subnet op -> its host-function command (docs/isa.md "CPU subnets"):
opcodes 0x600-0x60F on engine ENGINE_CPU with a typed block, like TPU-MLIR's
cpu layers with their param structs. One rule per op class; a rule may
decline (None), and the op then keeps its transitional per-op command.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from xdsl.ir import Operation

from tpuc.base.registry import Registry
from tpuc.dialects import tpu
from tpuc.ir.core import kind_of
from tpuc.passes.codegen.commands import tensor_record
from tpuc.passes.codegen.engine_rules import _plain_float, engine_command
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import ENGINE_CPU, Command

CpuRule = Callable[[Operation, int], Command | None]
CPU_RULES: Registry[type[Operation], CpuRule] = Registry("CPU command rules")


def cpu_rule(*classes: type[Operation]) -> Callable[[CpuRule], CpuRule]:
    """Register the host-function command of each op class."""
    return CPU_RULES.register(*classes)


def cpu_command(opcode: int, block, op: Operation, layer_id: int) -> Command:
    """The op's command on the CPU engine: every operand and result, `kind` 0."""
    operands = [tensor_record(v, op) for v in op.operands]
    results = [tensor_record(v, op) for v in op.results]
    cmd = engine_command(opcode, block, operands, results, layer_id, kind=0)
    return Command(
        dataclasses.replace(cmd.header, engine=ENGINE_CPU), cmd.operands, cmd.results, cmd.params
    )


@cpu_rule(tpu.TopKOp)
def _topk(op: Operation, layer_id: int) -> Command | None:
    """A float TopK (the interpreter's float kernel: TOP's, rounded)."""
    if kind_of(op) == "int" or len(op.operands) != 1 or len(op.results) != 2:
        return None
    records = [tensor_record(v, op) for v in (*op.operands, *op.results)]
    k = int(op.value("K"))
    if not _plain_float(records) or k < 0:
        return None
    block = isa.TopkBlock(
        int(op.value("axis")), k, int(bool(op.value("largest"))), int(bool(op.value("sorted")))
    )
    return cpu_command(isa.CPU_TOPK, block, op, layer_id)


def cpu_commands(op: Operation, layer_id: int) -> Command | None:
    """The op's host-function command, or None (no rule, or it declined)."""
    rule = CPU_RULES.get(type(op))
    return rule(op, layer_id) if rule is not None else None
