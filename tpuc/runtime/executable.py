"""Commands -> steps the simulator executes.

Engine-level commands (docs/isa.md) run on the kernel library alone
(`tpuc.runtime.engine`, no IR). A transitional per-op TIU (or CPU) command
is turned back into the TPU op it encodes — op class from the opcode,
attributes from its parameters, operand and result types from its tensor
records — once, when the bmodel is loaded; running it calls
the very kernel the TPU interpreter calls for that op. So a difference
between simulator and interpreter is a codegen or addressing bug, never an
arithmetic one.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntegerType, NoneType, TensorType
from xdsl.ir import Block

from tpuc.dialects import top, tpu
from tpuc.errors import TpucError
from tpuc.interp.tpu_interpreter import tpu_kernel_for
from tpuc.isa.opcodes import OP_NAMES
from tpuc.isa.params import decode_params
from tpuc.isa.records import FLAG_COEFF_MERGED, FLAG_FILTER_REORDERED, Command, TensorRecord
from tpuc.isa.types import tensor_type_of_record
from tpuc.runtime.device import Device
from tpuc.runtime.engine import Step, engine_step, is_engine_level

OP_CLASSES = {cls.name: cls for cls in (*top.TOP_OPS, *tpu.TPU_OPS)}


class KernelStep(Step):
    """A TIU or CPU command run by the TPU interpreter's kernel for its op."""

    def __init__(self, command: Command, device: Device, what: str):
        super().__init__(command, device, what)
        header = command.header
        name = OP_NAMES.get(header.opcode)
        cls = OP_CLASSES.get(name or "")
        if cls is None:
            raise TpucError(f"{what}: unknown opcode {header.opcode:#x}")
        try:
            attrs = decode_params(command.params)
        except ValueError as exc:
            raise TpucError(f"{what}: {exc}") from None
        self.bias: np.ndarray | None = None
        kernel_shape = attrs.get("kernel_shape") or []
        operand_types = [
            self._operand_type(i, r, kernel_shape) for i, r in enumerate(command.operands)
        ]
        if header.flags & FLAG_COEFF_MERGED:
            attrs.update(self._unmerge())
        block = Block(arg_types=operand_types)
        result_types = [tensor_type_of_record(r) for r in command.results]
        names = [f"{name}_{header.layer_id}_{i}" for i in range(len(result_types))]
        try:
            self.op = cls.make(
                list(block.args),
                names[0],
                attrs,
                result_types=result_types,
                result_names=names if len(names) > 1 else None,
            )
        except Exception as exc:  # noqa: BLE001 - a malformed command
            raise TpucError(f"{what}: cannot rebuild {name}: {exc}") from None
        self.kernel = tpu_kernel_for(self.op, "int" if header.kind else "float")
        if self.kernel is None:
            raise TpucError(f"{what}: no kernel for {name}")

    def _operand_type(self, index: int, record: TensorRecord, kernel_shape: list[int]):
        if record.absent:
            return NoneType()
        flags = self.command.header.flags
        if index == 1 and flags & FLAG_FILTER_REORDERED:
            _, oc, icg, _ = record.shape  # (1, oc, ic/g, kh*kw) -> (oc, ic/g, kh, kw)
            element = tensor_type_of_record(record).element_type
            return TensorType(element, [oc, icg, *kernel_shape])
        if index == 2 and flags & FLAG_COEFF_MERGED:
            return TensorType(IntegerType(32), [record.shape[1]])
        return tensor_type_of_record(record)

    def _unmerge(self) -> dict:
        """Bias, multiplier and rshift from the (1, oc, 1, 3) coefficient."""
        coeff = self.read(2).reshape(-1, 3)
        self.bias = coeff[:, 0]
        return {
            "multiplier": [int(v) for v in coeff[:, 1]],
            "rshift": [int(v) for v in coeff[:, 2]],
        }

    def run(self) -> list[np.ndarray]:
        args = [self.read(i) for i in range(len(self.operands))]
        if self.bias is not None:
            args[2] = self.bias
        flags = self.command.header.flags
        if flags & FLAG_FILTER_REORDERED:
            args[1] = args[1].reshape(self.op.operands[1].type.get_shape())
        try:
            out = self.kernel(self.op, args)
        except TpucError:
            raise
        except Exception as exc:  # a numpy error inside a kernel: name the command
            raise TpucError(f"{self.what} ({self.op.name}) failed: {exc}") from exc
        return self.write_results(out)


def make_step(command: Command, device: Device, what: str) -> Step:
    """Engine-level commands run on the kernel library alone
    (`tpuc.runtime.engine`); transitional per-op commands through the op
    they encode."""
    if is_engine_level(command.header.opcode):
        return engine_step(command, device, what)
    return KernelStep(command, device, what)
