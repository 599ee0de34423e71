"""A subnet's boundary when one tpu.Group reads another's result: the value
passes between two ops of the subnet (its reader is a tpu.Load inside the
second group), so it is not a subnet output; only the returned value is."""

from __future__ import annotations

from tpuc.ir.core import main_function
from tpuc.ir.module_io import parse_module
from tpuc.passes.codegen.bmodel_builder import boundary, top_ops

T = "tensor<1x64x8x8xf32>"


def at(addr: int) -> str:
    """The tensor type with its global address."""
    return f"tensor<1x64x8x8xf32, {addr} : i64>"


SLICES = "#tpu.slices<n = [(0, 1)], h = [(0, 8)], w = [(0, 8)]>"
GROUP_ATTRS = ", ".join(
    f"{k} = {v} : i64"
    for k, v in dict(nsecs=1, hsecs=1, wsecs=1, stages=3, timesteps=1, cycles=1).items()
)
LOCAL = f"#tpu.local<ts = 0, stage = 1, addr = 0, size = 256, slices = {SLICES}>"


def _group(name: str, source: str, addr: int) -> str:
    load = "{ts = 0 : i64, stage = 1 : i64, addr = 256 : i64, size = 256 : i64}"
    return f"""
    %{name} = "tpu.Group"(%{source}) ({{
      %l = "tpu.Load"(%{source}) {load} : ({at(addr - 4096)}) -> {T}
      %r = "tpu.Relu"(%l) {{name = "{name}", lg = {LOCAL}}} : ({T}) -> {T}
      %s = "tpu.Store"(%r) {{ts = 0 : i64, stage = 1 : i64, slices = {SLICES}}} : ({T}) -> {T}
      "tpu.Yield"(%s) : ({T}) -> ()
    }}) {{{GROUP_ATTRS}}} : ({at(addr - 4096)}) -> {at(addr)}"""


MODULE = f"""
builtin.module attributes {{module.chip = "bm1684x", module.state = "TPU_ADDRESSED"}} {{
  func.func @main(%arg0: {T}) -> {at(12288)} {{
    %x = "top.Input"(%arg0) {{name = "x"}} : ({T}) -> {at(4096)}
    {_group("a", "x", 8192)}
    {_group("b", "a", 12288)}
    func.return %b : {at(12288)}
  }}
}}
"""


def test_a_value_between_two_groups_is_not_a_subnet_output():
    module = parse_module(MODULE)
    members = [(i, op) for i, op in enumerate(top_ops(module)) if op.name == "tpu.Group"]
    returned = set(main_function(module).body.block.last_op.operands)
    inputs, outputs = boundary(members, returned)
    assert [t.name for t in inputs] == ["x"]
    assert [t.name for t in outputs] == ["b"]
