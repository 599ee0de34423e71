"""Building one ONNX graph out of TOP ops: the builder the export rules
write nodes into, and the registry of those rules.

A rule is keyed by the kernel-library function (`run` of
`tpuc.interp.top_ops.registry.LIBRARY`) the op's numpy kernel calls, and
reads the same parameter record: the ONNX nodes it writes compute what
that kernel computes, in float32. A rule returns False for a variant it
cannot express (before writing anything); the op then runs in numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpuc.kernels.requant import Relu

OPSET = 17  # LayerNormalization needs 17; onnxruntime >= 1.18 runs it


@dataclass(frozen=True)
class Tensor:
    """An operand as a rule sees it: its graph name, its static shape, and
    its data when it is a weight (an initializer rules may fold)."""

    name: str
    shape: tuple[int, ...]
    const: np.ndarray | None = None


Rule = Callable[[Any, "GraphBuilder", Sequence[Tensor | None], Sequence[str]], bool]
"""rule(record, builder, operands (None: a top.None), result names) -> written?"""

EXPORTS: dict[Callable, Rule] = {}


def export(*runs: Callable) -> Callable[[Rule], Rule]:
    """Register `rule` as the ONNX form of ops running any of `runs`."""

    def decorate(rule: Rule) -> Rule:
        for run in runs:
            EXPORTS[run] = rule
        return rule

    return decorate


class GraphBuilder:
    """Nodes and initializers of one graph; fresh names for temporaries."""

    def __init__(self, label: str, shapes: dict[str, tuple[int, ...]]) -> None:
        self.nodes: list = []
        self.initializers: dict[str, np.ndarray] = {}
        self.label = label  # the TOP tensor being exported: names its nodes
        self.shapes = shapes  # declared shapes of its results, by graph name
        self._count = 0

    def fresh(self, hint: str = "t") -> str:
        """A name no other op's builder makes (the label is a TOP tensor name)."""
        self._count += 1
        return f"{self.label}/{hint}{self._count}"

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs) -> None:
        from onnx import helper

        name = f"{self.label}#{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name, **attrs))

    def const(self, value, dtype=np.float32, hint: str = "c") -> str:
        """A new initializer holding `value`."""
        name = self.fresh(hint)
        self.initializers[name] = np.ascontiguousarray(value, dtype=dtype)
        return name

    def ints(self, values: Sequence[int]) -> str:
        return self.const(list(values), np.int64, "i")

    def fused(self, op_type: str, inputs: Sequence[str], relu: Relu, out: str, **attrs) -> None:
        """op_type(inputs) into `out`, through the fused ReLU when it is on."""
        if not relu.on:
            self.node(op_type, inputs, [out], **attrs)
            return
        mid = self.fresh()
        self.node(op_type, inputs, [mid], **attrs)
        self.relu(mid, relu, out)

    def relu(self, x: str, relu: Relu, out: str) -> None:
        """max(x, 0), capped at the limit when it has one (Clip), into `out`."""
        upper = relu.upper()
        if upper is None:
            self.node("Relu", [x], [out])
            return
        self.node("Clip", [x, self.const(0.0), self.const(upper)], [out])

    def reshaped(self, t: Tensor, shape: Sequence[int]) -> str:
        """t in `shape`: a folded initializer for weights, else a Reshape."""
        if t.const is not None:
            return self.const(t.const.reshape(shape))
        out = self.fresh()
        self.node("Reshape", [t.name, self.ints(shape)], [out])
        return out
