"""Layer groups in the IR: `tpu.Group` holding its ops, `tpu.Load`, `tpu.Store`.

As TPU-MLIR's tpu.Group / tpu.Load / tpu.Store (layer-group.md §3): the
layer-group pass moves each group's ops into the region of a `tpu.Group`
whose operands are what the group reads from global memory (activations,
weights, and values it passes through untouched such as top.None) and whose
results are what it writes back. In the body, in this order:

    tpu.Load   a slice of a group operand (a whole weight) into local memory:
               ts, stage, addr/size (its buffer, per-lane bytes), held
               (a weight loaded in the first iteration only), slices;
    the ops    each with `lg = #tpu.local<...>` (group_attrs), reading loads
               and each other;
    tpu.Store  a slice of an op's result back to global memory: ts, stage,
               slices (what it writes, may be less than the op's buffer holds);
    tpu.Yield  the stores, one per group result.

The group runs nsecs·hsecs·wsecs loop iterations (+ stages − 1 to drain the
pipeline), each iteration all `timesteps`; an item of stage s works on the
slice of s iterations earlier. docs/layer-group.md "In the IR" has an example.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from xdsl.dialects.builtin import IntegerAttr, NoneAttr, TensorType, UnitAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator
from xdsl.utils.exceptions import VerifyException

from tpuc.dialects import top
from tpuc.dialects.tpu.group_attrs import LocalAttr, SlicesAttr

LG_ATTR = "lg"
"""The attribute holding an op's `#tpu.local` inside a group."""


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, 64)


def same_tensor(a: Attribute, b: Attribute) -> bool:
    """The same tensor type up to its encoding (a global value's address:
    its local copy has none)."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.element_type == b.element_type and a.get_shape() == b.get_shape()
    return a == b


def local_type(t: Attribute) -> Attribute:
    """A value's type as its copy in local memory has it (no address)."""
    if isinstance(t, TensorType) and not isinstance(t.encoding, NoneAttr):
        return TensorType(t.element_type, t.get_shape())
    return t


@irdl_op_definition
class GroupOp(IRDLOperation):
    """A layer group (module docstring)."""

    name = "tpu.Group"

    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    nsecs = attr_def(IntegerAttr)
    hsecs = attr_def(IntegerAttr)
    wsecs = attr_def(IntegerAttr)
    stages = attr_def(IntegerAttr)
    timesteps = attr_def(IntegerAttr)
    cycles = attr_def(IntegerAttr)

    @staticmethod
    def make(inputs, result_types, block: Block, secs, timesteps: int, cycles: int, stages=3):
        """`secs`: an object with n, h, w (the slice counts)."""
        n, h, w = secs.n, secs.h, secs.w
        attrs = {"nsecs": n, "hsecs": h, "wsecs": w, "stages": stages}
        attrs |= {"timesteps": timesteps, "cycles": cycles}
        return GroupOp.build(
            operands=[list(inputs)],
            result_types=[list(result_types)],
            regions=[Region(block)],
            attributes={k: _int(v) for k, v in attrs.items()},
        )

    @property
    def secs(self) -> tuple[int, int, int]:
        return (self.nsecs.value.data, self.hsecs.value.data, self.wsecs.value.data)

    @property
    def block(self) -> Block:
        return self.body.block

    def loads(self) -> list[LoadOp]:
        return [op for op in self.block.ops if isinstance(op, LoadOp)]

    def stores(self) -> list[StoreOp]:
        return [op for op in self.block.ops if isinstance(op, StoreOp)]

    def layers(self) -> list[Operation]:
        """The group's own ops (not loads, stores, yield), in order."""
        return [op for op in self.block.ops if not isinstance(op, GROUP_PLUMBING)]

    def stored_values(self) -> list[SSAValue]:
        """Per result, the op result its store writes back."""
        return [store.source for store in self.yielded_stores()]

    @property
    def names(self) -> list[str]:
        """Tensor names of the results: those of the values stored."""
        found = []
        for value in self.stored_values():
            names = getattr(value.owner, "names", None)
            found.append(names[value.index] if names else f"{self.name}_{len(found)}")
        return found

    def yielded_stores(self) -> list[StoreOp]:
        """The store of each result, in result order."""
        last = self.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("tpu.Group: its body must end with tpu.Yield")
        stores = []
        for value in last.operands:
            if not isinstance(value.owner, StoreOp) or value.owner.parent is not self.block:
                raise VerifyException(
                    "tpu.Group: tpu.Yield must yield the group's tpu.Store results"
                )
            stores.append(value.owner)
        return stores

    def verify_(self) -> None:
        stores = self.yielded_stores()
        if len(stores) != len(self.results):
            raise VerifyException(
                f"tpu.Group: yields {len(stores)} values for {len(self.results)} results"
            )
        for store, result in zip(stores, self.results, strict=True):
            if not same_tensor(store.results[0].type, result.type):
                raise VerifyException("tpu.Group: a result's type differs from its store's")
        for key in ("nsecs", "hsecs", "wsecs", "stages", "timesteps"):
            if getattr(self, key).value.data < 1:
                raise VerifyException(f"tpu.Group: {key} must be >= 1")
        for op in self.block.ops:
            _check_member(self, op)


def _check_place(group: GroupOp, op: Operation, ts: int, stage: int, slices) -> None:
    what = _label(op)
    steps, stages = group.timesteps.value.data, group.stages.value.data
    if not 0 <= ts < steps:
        raise VerifyException(f"tpu.Group: {what}: timestep {ts} outside [0, {steps})")
    if not 0 <= stage < stages:
        raise VerifyException(f"tpu.Group: {what}: stage {stage} outside [0, {stages})")
    if slices is not None and slices.counts() != group.secs:
        raise VerifyException(
            f"tpu.Group: {what}: slices per axis {slices.counts()} differ from the group's "
            f"n, h, w slice counts {group.secs}"
        )


def _label(op: Operation) -> str:
    names = getattr(op, "names", None)
    return f"{op.name} '{names[0]}'" if names else op.name


def _check_outer_operands(group: GroupOp, op: Operation) -> None:
    """An op of the group reads loads and other ops of the group; from
    outside only values without data (top.None), which are group operands."""
    inputs = set(group.inputs)
    for value in op.operands:
        if value.owner.parent_op() is group:  # type: ignore[union-attr]
            continue
        if not isinstance(value.owner, top.NoneOp):
            raise VerifyException(
                f"tpu.Group: {_label(op)} reads a global value without a tpu.Load"
            )
        if value not in inputs:
            raise VerifyException(
                f"tpu.Group: {_label(op)} reads a value from outside that is not a group operand"
            )


def _check_member(group: GroupOp, op: Operation) -> None:
    if isinstance(op, YieldOp):
        return
    if isinstance(op, LoadOp):
        if op.source.owner.parent_op() is group:  # type: ignore[union-attr]
            raise VerifyException("tpu.Group: tpu.Load must load a value from outside the group")
        if op.source not in set(group.inputs):
            raise VerifyException("tpu.Group: tpu.Load loads a value that is not a group operand")
        _check_place(group, op, op.ts.value.data, op.stage.value.data, op.slices)
        return
    if isinstance(op, StoreOp):
        owner = op.source.owner
        if owner.parent_op() is not group or isinstance(owner, GROUP_PLUMBING):  # type: ignore[union-attr]
            raise VerifyException(
                "tpu.Group: tpu.Store must store the result of an op of the group"
            )
        _check_place(group, op, op.ts.value.data, op.stage.value.data, op.slices)
        return
    info = op.attributes.get(LG_ATTR)
    if not isinstance(info, LocalAttr):
        raise VerifyException(f"tpu.Group: {_label(op)} has no `{LG_ATTR} = #tpu.local<...>`")
    _check_place(group, op, info.ts.data, info.stage.data, info.slices)
    _check_outer_operands(group, op)


class _Moved(IRDLOperation):
    """Shared by Load and Store: one tensor moved per slice."""

    source = operand_def()
    result = result_def()
    ts = attr_def(IntegerAttr)
    stage = attr_def(IntegerAttr)
    slices = opt_attr_def(SlicesAttr)

    def verify_(self) -> None:
        if not same_tensor(self.result.type, self.source.type):
            raise VerifyException(f"{self.name}: result type differs from the moved value's")


@irdl_op_definition
class LoadOp(_Moved):
    """Global -> local: a slice of a group operand (a whole weight when no slices)."""

    name = "tpu.Load"

    addr = attr_def(IntegerAttr)
    size = attr_def(IntegerAttr)
    held = opt_attr_def(UnitAttr)
    traits = traits_def(HasParent(GroupOp))

    @staticmethod
    def make(source, ts, stage, addr, size, held, slices):
        attrs = {k: _int(v) for k, v in (("ts", ts), ("stage", stage), ("addr", addr))}
        attrs["size"] = _int(size)
        if held:
            attrs["held"] = UnitAttr()
        if slices is not None:
            attrs["slices"] = slices
        return LoadOp.build(
            operands=[source], result_types=[local_type(source.type)], attributes=attrs
        )


@irdl_op_definition
class StoreOp(_Moved):
    """Local -> global: a slice of an op's result."""

    name = "tpu.Store"

    traits = traits_def(HasParent(GroupOp))

    @staticmethod
    def make(source, ts, stage, slices):
        attrs = {"ts": _int(ts), "stage": _int(stage), "slices": slices}
        return StoreOp.build(operands=[source], result_types=[source.type], attributes=attrs)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The end of a group's body: its stores, one per group result."""

    name = "tpu.Yield"

    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(GroupOp))


GROUP_PLUMBING = (LoadOp, StoreOp, YieldOp)
GROUP_OPS = [GroupOp, LoadOp, StoreOp, YieldOp]


def layer_ops(ops: Iterable[Operation]) -> Iterator[Operation]:
    """`ops` with every group replaced by its own ops: the layers in program
    order (what codegen numbers)."""
    for op in ops:
        if isinstance(op, GroupOp):
            yield from op.layers()
        else:
            yield op


def local_of(op: Operation) -> LocalAttr | None:
    """The `#tpu.local` of an op of a group (None outside groups)."""
    found = op.attributes.get(LG_ATTR)
    return found if isinstance(found, LocalAttr) else None


__all__ = [
    "GROUP_OPS",
    "GROUP_PLUMBING",
    "LG_ATTR",
    "GroupOp",
    "LoadOp",
    "StoreOp",
    "YieldOp",
    "layer_ops",
    "local_of",
]
