"""Tiny TOP_CALIBRATED modules written as MLIR text, for the lowering tests:
every result carries a `!quant.calibrated<f32<lo:hi>>` range, weights are
inline dense values."""

from __future__ import annotations

import numpy as np


def ttype(shape, rng=None) -> str:
    dims = "x".join(str(d) for d in shape)
    if rng is None:
        return f"tensor<{dims}xf32>"
    return f"tensor<{dims}x!quant.calibrated<f32<{float(rng[0])!r}:{float(rng[1])!r}>>>"


def attr_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(attr_text(v) for v in value) + "]"
    return repr(value)


class Net:
    """A func @main written op by op; values are (ssa name, type text)."""

    def __init__(self):
        self.args: list[str] = []
        self.lines: list[str] = []

    def _ssa(self) -> str:
        return f"%{len(self.lines)}"

    def input(self, name, shape, rng):
        arg = f"%arg{len(self.args)}"
        self.args.append(f"{arg}: {ttype(shape)}")
        return self.op("top.Input", [(arg, ttype(shape))], name, shape, rng)

    def weight(self, name, array):
        array = np.asarray(array, np.float32)
        t = ttype(array.shape)
        ssa = self._ssa()
        dense = f"dense<{array.tolist()}> : {t}"
        self.lines.append(
            f'{ssa} = "top.Weight"() {{name = "{name}", value = {dense}}} : () -> {t}'
        )
        return ssa, t

    def none(self):
        ssa = self._ssa()
        self.lines.append(f'{ssa} = "top.None"() : () -> none')
        return ssa, "none"

    def op(self, kind, operands, name, dims, rng, **attrs):
        """`kind` is "top.Conv" or just "Conv"."""
        kind = kind if "." in kind else f"top.{kind}"
        ssa, t = self._ssa(), ttype(dims, rng)
        fields = ", ".join(
            [f'name = "{name}"'] + [f"{k} = {attr_text(v)}" for k, v in attrs.items()]
        )
        args = ", ".join(s for s, _ in operands)
        types = ", ".join(t for _, t in operands)
        self.lines.append(f'{ssa} = "{kind}"({args}) {{{fields}}} : ({types}) -> {t}')
        return ssa, t

    def text(self, *outputs) -> str:
        results = ", ".join(t for _, t in outputs)
        body = "\n    ".join(self.lines)
        ret = ", ".join(s for s, _ in outputs)
        return (
            'builtin.module attributes {module.state = "TOP_CALIBRATED"} {\n'
            f"  func.func @main({', '.join(self.args)}) -> ({results}) {{\n    {body}\n"
            f"    func.return {ret} : {results}\n  }}\n}}\n"
        )
