"""The TOP float interpreter: runs `func @main` of a TOP module with numpy.

A plain walk over the function body with a dict from SSA value to array;
each intermediate is dropped right after its last use (unless every tensor
is wanted), so peak memory stays near the widest point of the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.errors import TpucError
from tpuc.interp.kernels import KERNELS


def main_function(module: ModuleOp) -> func.FuncOp:
    """`func @main`, or the module's only function."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise TpucError("module has no func @main to run")


def tensor_names(op: Operation) -> list[str]:
    if isinstance(op, TensorOp):
        return op.names
    return [f"{op.name}_{i}" for i in range(len(op.results))]


class TopInterpreter:
    """A TOP module prepared for repeated runs (e.g. over a calibration set):
    the op order, kernels and last uses are resolved once."""

    def __init__(self, module: ModuleOp):
        body = main_function(module).body.block
        self.ops: list[Operation] = [op for op in body.ops if not isinstance(op, func.ReturnOp)]
        ret = body.last_op
        self.returned: list[SSAValue] = list(ret.operands) if isinstance(ret, func.ReturnOp) else []
        self.last_use = self._last_uses()
        self.inputs = [op for op in self.ops if isinstance(op, top.InputOp)]
        missing = sorted(
            {op.name for op in self.ops if not self._is_leaf(op) and type(op) not in KERNELS}
        )
        if missing:
            raise TpucError(f"the TOP interpreter has no kernel for: {', '.join(missing)}")

    @staticmethod
    def _is_leaf(op: Operation) -> bool:
        return isinstance(op, top.InputOp | top.WeightOp | top.NoneOp)

    def _last_uses(self) -> dict[SSAValue, int]:
        """Index of the last op reading each value (returned values: never freed)."""
        last: dict[SSAValue, int] = {}
        for i, op in enumerate(self.ops):
            for value in op.operands:
                last[value] = i
        for value in self.returned:
            last[value] = len(self.ops)
        return last

    def run(
        self,
        weights: Mapping[str, np.ndarray],
        inputs: Mapping[str, np.ndarray],
        *,
        dump_all: bool = False,
        progress: bool = False,
    ) -> dict[str, np.ndarray]:
        """Outputs by tensor name (every tensor, inputs included, with dump_all)."""
        with np.errstate(all="ignore"):  # inf/nan propagate silently, as in onnxruntime
            return self._run(weights, inputs, dump_all, progress)

    def _run(self, weights, inputs, dump_all: bool, progress: bool) -> dict[str, np.ndarray]:
        env: dict[SSAValue, Any] = {}
        dumped: dict[str, np.ndarray] = {}
        for i, op in enumerate(_progress(self.ops, progress)):
            results = self._execute(op, env, weights, inputs)
            for value, name, array in zip(op.results, tensor_names(op), results, strict=True):
                env[value] = array
                if dump_all and not isinstance(op, top.WeightOp | top.NoneOp):
                    dumped[name] = array
                if not dump_all and self.last_use.get(value, -1) <= i:
                    del env[value]
            if not dump_all:
                for value in set(op.operands):
                    if self.last_use[value] == i:
                        env.pop(value, None)
        outputs = {name: env[v] for v, name in self._returned_names()}
        return {**dumped, **outputs} if dump_all else outputs

    def _returned_names(self) -> Iterable[tuple[SSAValue, str]]:
        for value in self.returned:
            owner = value.owner
            if not isinstance(owner, Operation):
                raise TpucError("func @main returns a block argument, not a TOP tensor")
            yield value, tensor_names(owner)[value.index]

    def _execute(self, op: Operation, env, weights, inputs) -> list[np.ndarray | None]:
        if isinstance(op, top.NoneOp):
            return [None]
        if isinstance(op, top.WeightOp):
            return [self._weight(op, weights)]
        if isinstance(op, top.InputOp):
            return [self._input(op, inputs)]
        args = [env[v] for v in op.operands]
        name = tensor_names(op)[0]
        try:
            result = KERNELS[type(op)](op, args)
        except TpucError:
            raise
        except Exception as exc:  # a numpy error inside a kernel: name the op
            raise TpucError(f"{op.name} '{name}' failed: {exc}") from exc
        results = list(result) if isinstance(result, tuple) else [result]
        if len(results) != len(op.results):
            raise TpucError(
                f"{op.name} '{name}': kernel gave {len(results)} results, op has {len(op.results)}"
            )
        return [
            self._checked(op, v, np.asarray(r, dtype=np.float32))
            for v, r in zip(op.results, results, strict=True)
        ]

    @staticmethod
    def _checked(op: Operation, value: SSAValue, array: np.ndarray) -> np.ndarray:
        expected = shape_of(value)
        if expected is not None and tuple(array.shape) != expected:
            name = tensor_names(op)[value.index]
            raise TpucError(
                f"{op.name} '{name}': computed shape {list(array.shape)} "
                f"but the IR declares {list(expected)}"
            )
        return array

    @staticmethod
    def _weight(op: top.WeightOp, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        name = op.names[0]
        if name not in weights:
            raise TpucError(f"weight '{name}' is missing from the weight file")
        array = np.asarray(weights[name], dtype=np.float32)
        expected = shape_of(op.output)
        if expected is not None and array.shape != expected:
            if array.size != int(np.prod(expected)):
                raise TpucError(
                    f"weight '{name}' has shape {list(array.shape)}, the IR declares "
                    f"{list(expected)}"
                )
            array = array.reshape(expected)
        return array

    @staticmethod
    def _input(op: top.InputOp, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        name = op.names[0]
        expected = shape_of(op.output)
        shown = list(expected) if expected is not None else "any"
        if name not in inputs:
            raise TpucError(f"input '{name}' (shape {shown}) is missing from the inputs")
        array = np.asarray(inputs[name], dtype=np.float32)
        if expected is not None and array.shape != expected:
            raise TpucError(
                f"input '{name}' has shape {list(array.shape)}, expected {list(expected)}"
            )
        return array


def _progress(ops: list[Operation], enabled: bool) -> Iterable[Operation]:
    if not enabled:
        return ops
    from tqdm import tqdm

    return tqdm(ops, desc="top interpreter", unit="op")


def run_top(
    module: ModuleOp,
    weights: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    *,
    dump_all: bool = False,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Run `func @main` of a TOP module; return its outputs by tensor name
    (with `dump_all`, every tensor: inputs and each op's results)."""
    return TopInterpreter(module).run(weights, inputs, dump_all=dump_all, progress=progress)
