"""Commands -> steps the simulator executes.

A TIU (or CPU) command is turned back into the TPU op it encodes — op class
from the opcode, attributes from its parameters, operand and result types
from its tensor records — once, when the bmodel is loaded; running it calls
the very kernel the TPU interpreter calls for that op. So a difference
between simulator and interpreter is a codegen or addressing bug, never an
arithmetic one. A GDMA copy is a strided numpy assignment.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntegerType, NoneType, TensorType
from xdsl.ir import Block

from tpuc.dialects import top, tpu
from tpuc.errors import TpucError
from tpuc.interp.tpu_interpreter import tpu_kernel_for
from tpuc.isa.opcodes import GDMA_COPY, OP_NAMES
from tpuc.isa.params import decode_params
from tpuc.isa.records import (
    FLAG_COEFF_MERGED,
    FLAG_FILTER_REORDERED,
    TENSOR_COEFF,
    Command,
    TensorRecord,
)
from tpuc.isa.types import tensor_type_of_record
from tpuc.runtime.device import Device, Region

OP_CLASSES = {cls.name: cls for cls in (*top.TOP_OPS, *tpu.TPU_OPS)}

Bound = tuple[TensorRecord, Region]


class Step:
    """One executable command: `run()` reads its operands from device memory,
    computes, and writes its results."""

    def __init__(self, command: Command, device: Device, what: str):
        self.command, self.device, self.what = command, device, what
        self.operands: list[Bound | None] = [
            self._bind(r, f"{what} operand {i}") for i, r in enumerate(command.operands)
        ]
        self.results: list[Bound] = [
            self._bind(r, f"{what} result {i}") for i, r in enumerate(command.results)
        ]

    def _bind(self, record: TensorRecord, what: str) -> Bound | None:
        if record.absent:
            return None
        return record, self.device.region(record, what)

    def read(self, index: int) -> np.ndarray | None:
        bound = self.operands[index]
        if bound is None:
            return None
        record, region = bound
        return self.device.read(record, region, coeff=bool(record.flags & TENSOR_COEFF))

    def run(self) -> list[np.ndarray]:
        raise NotImplementedError


class CopyStep(Step):
    def run(self) -> list[np.ndarray]:
        (src, src_region), (dst, dst_region) = self.operands[0], self.results[0]
        values = self.device.view(src, src_region).copy()
        self.device.view(dst, dst_region)[...] = values
        return []


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
        results = list(out) if isinstance(out, tuple) else [out]
        if len(results) != len(self.results):
            raise TpucError(
                f"{self.what}: kernel gave {len(results)} results, command has {len(self.results)}"
            )
        arrays = []
        for (record, region), value in zip(self.results, results, strict=True):
            array = np.asarray(value, np.float32)
            if array.shape != record.shape:
                raise TpucError(
                    f"{self.what}: computed shape {list(array.shape)}, "
                    f"command says {list(record.shape)}"
                )
            self.device.write(record, region, array)
            arrays.append(array)
        return arrays


def make_step(command: Command, device: Device, what: str) -> Step:
    if command.header.opcode == GDMA_COPY:
        return CopyStep(command, device, what)
    return KernelStep(command, device, what)
