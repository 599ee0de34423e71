"""Small TPU modules for the layer-group tests, written as MLIR text.

`Chain` appends ops to one activation stream (each reads the previous
result, `fork` reads an earlier one) and computes output shapes itself, so
tests can build random conv/pool/elementwise chains in a few lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpuc.ir.module_io import parse_module

Q8 = "!quant.uniform<i8:f32, 0.1>"
"""An integer element type: integer convolutions slice bit-exactly (float
GEMM convolutions compute their whole output, see `layer_group.slicing`)."""


def _t(shape, element="f32") -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{element}>"


def _ints(values) -> str:
    return "[" + ", ".join(f"{v} : i64" for v in values) + "]"


@dataclass
class Chain:
    shape: tuple[int, int, int, int]
    chip: str = "bm1684x"
    element: str = "f32"
    lines: list[str] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    count: int = 0

    def __post_init__(self):
        self.lines.append(
            f'%v0 = "top.Input"(%arg0) {{name = "in"}} : ({_t(self.shape, self.element)}) '
            f"-> {_t(self.shape, self.element)}"
        )
        self.lines.append('%none = "top.None"() : () -> none')
        self.shapes.append(self.shape)

    def _add(self, text: str, shape) -> int:
        self.count += 1
        self.lines.append(f"%v{self.count} = {text}")
        self.shapes.append(tuple(shape))
        return self.count

    def _weight(self, shape) -> str:
        self.lines.append(
            f'%w{self.count + 1}_{len(self.lines)} = "top.Weight"() {{name = "w{len(self.lines)}"}}'
            f" : () -> {_t(shape, self.element)}"
        )
        return f"%w{self.count + 1}_{len(self.lines) - 1}"

    def conv(self, oc, k, s=1, p=0, d=1, group=1, src=None) -> int:
        src = self.count if src is None else src
        n, c, h, w = self.shapes[src]
        ext = (k - 1) * d + 1
        oh, ow = (h + 2 * p - ext) // s + 1, (w + 2 * p - ext) // s + 1
        filt = self._weight((oc, c // group, k, k))
        out = (n, oc, oh, ow)
        return self._add(
            f'"tpu.Conv2D"(%v{src}, {filt}, %none) {{name = "op{self.count + 1}", '
            f"kernel_shape = {_ints([k, k])}, strides = {_ints([s, s])}, "
            f"pads = {_ints([p] * 4)}, dilations = {_ints([d, d])}, group = {group} : i64}} : "
            f"({_t(self.shapes[src], self.element)}, {_t((oc, c // group, k, k), self.element)}, "
            f"none) -> {_t(out, self.element)}",
            out,
        )

    def pool(self, k, s=1, p=0, mode="Max", src=None) -> int:
        src = self.count if src is None else src
        n, c, h, w = self.shapes[src]
        out = (n, c, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1)
        return self._add(
            f'"tpu.Pool2D"(%v{src}) {{name = "op{self.count + 1}", kernel_shape = '
            f"{_ints([k, k])}, strides = {_ints([s, s])}, pads = {_ints([p] * 4)}, "
            f'ceil_mode = false, pool_mode = "{mode}"}} : ({_t(self.shapes[src], self.element)})'
            f" -> {_t(out, self.element)}",
            out,
        )

    def unary(self, name="tpu.Relu", src=None) -> int:
        src = self.count if src is None else src
        shape = self.shapes[src]
        return self._add(
            f'"{name}"(%v{src}) {{name = "op{self.count + 1}"}} : '
            f"({_t(shape, self.element)}) -> {_t(shape, self.element)}",
            shape,
        )

    def binary(self, a, b, name="tpu.Add") -> int:
        shape = self.shapes[a]
        return self._add(
            f'"{name}"(%v{a}, %v{b}) {{name = "op{self.count + 1}"}} : '
            f"({_t(shape, self.element)}, {_t(self.shapes[b], self.element)}) "
            f"-> {_t(shape, self.element)}",
            shape,
        )

    def concat(self, *srcs) -> int:
        n, _, h, w = self.shapes[srcs[0]]
        out = (n, sum(self.shapes[s][1] for s in srcs), h, w)
        args = ", ".join(f"%v{s}" for s in srcs)
        types = ", ".join(_t(self.shapes[s], self.element) for s in srcs)
        return self._add(
            f'"tpu.Concat"({args}) {{name = "op{self.count + 1}", axis = 1 : i64}} : '
            f"({types}) -> {_t(out, self.element)}",
            out,
        )

    def reshape(self, shape) -> int:
        return self._add(
            f'"tpu.Reshape"(%v{self.count}) {{name = "op{self.count + 1}", shape = '
            f"{_ints(shape)}}} : ({_t(self.shapes[self.count], self.element)}) -> "
            f"{_t(shape, self.element)}",
            shape,
        )

    def text(self) -> str:
        last = _t(self.shapes[self.count], self.element)
        body = "\n    ".join(self.lines)
        return (
            f'builtin.module attributes {{module.chip = "{self.chip}", '
            f'module.state = "TPU_LOWERED"}} {{\n'
            f"  func.func @main(%arg0: {_t(self.shape, self.element)}) -> {last} {{\n"
            f"    {body}\n    func.return %v{self.count} : {last}\n  }}\n}}\n"
        )

    def module(self):
        return parse_module(self.text())
