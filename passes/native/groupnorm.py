"""Instance and group normalisation, after TPU-MLIR's
`Interfaces/BM1684X/{InstanceNorm,GroupNorm}.cpp`.

Both are spec-style calls over [x, weight?, bias?] with `affine` = weight |
bias << 1 (float only: tpuc keeps them in F32 in INT8 mode). The weight and
bias go in as per-channel [1, C, 1, 1] coefficients in the input's type; a
per-group vector (opset-18 GroupNormalization) is repeated over its channels,
as tpuc's kernel does.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.base.dtypes import from_storage
from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
)
from tpuc.passes.native.conv import raw_spec, to_float_storage
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

declare("instance_norm_common_spec_t", "f32 eps; i32 affine")
InstanceNormGlobal = declare("instance_norm_global_spec_t", "instance_norm_common_spec_t common")
declare("group_norm_common_spec_t", "i32 group_num; f32 eps; i32 affine")
GroupNormGlobal = declare("group_norm_global_param_t", "group_norm_common_spec_t common; i32 axis")


def _affine_inputs(op: Operation, ctx: NativeContext, groups: int) -> tuple[list[bytes], int]:
    """Specs of [x, weight?, bias?] (per-channel coefficients) and `affine`."""
    src = op.operands[0]
    if not is_float(src) or dtype_name(op.results[0]) != dtype_name(src):
        raise NotExpressible(f"a quantized {op.name}")
    shape = shape_of(src)
    if len(shape) < 3:
        raise NotExpressible(f"a {op.name} of a {len(shape)}-D tensor")
    channels, dtype = shape[1], dtype_name(src)
    inputs, affine = [ctx.spec(src)], 0
    for bit, value in enumerate(op.operands[1:3]):
        if isinstance(value.owner, top.NoneOp):
            continue
        inputs.append(_per_channel(op, ctx, value, channels, groups, dtype))
        affine |= 1 << bit
    return inputs, affine


def _per_channel(op: Operation, ctx: NativeContext, value: SSAValue, channels: int, groups: int,
                 dtype: str) -> bytes:  # fmt: skip
    """A [1, C, 1, 1] coefficient of `value`'s values in the input's type."""
    if not isinstance(value.owner, top.WeightOp):
        raise NotExpressible(f"a {op.name} whose weight or bias is not a weight")
    values = np.asarray(read_weight(value.owner)).reshape(-1)
    if dtype_name(value) == "bf16":  # the store holds bf16 weights as their bits
        values = from_storage(values.astype(np.uint16), "bf16")
    values = values.astype(np.float32)
    if values.size == groups and groups != channels:
        values = np.repeat(values, channels // groups)
    if values.size != channels:
        raise NotExpressible(f"a {op.name} with {values.size} weights for {channels} channels")
    stored = values if dtype == "f32" else to_float_storage(values, dtype)
    name = f"{op.names[0]}_{value.owner.names[0]}_{dtype}"
    addr = ctx.coeffs.add(name, stored)
    return raw_spec(addr, dtype_code(op.operands[0]), (1, channels, 1, 1))


@native_rule(tpu.InstanceNormOp)
def instance_norm(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """instance_norm_global_spec_t {eps, affine}."""
    inputs, affine = _affine_inputs(op, ctx, shape_of(op.operands[0])[1])
    p = InstanceNormGlobal()
    p.common.eps, p.common.affine = op.value("eps"), affine
    return [ctx.call("backend_api_instance_norm_global", p, op, inputs=inputs)]


@native_rule(tpu.GroupNormOp)
def group_norm(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """group_norm_global_param_t {group_num, eps, affine, axis 1}."""
    groups = op.value("num_groups")
    channels = shape_of(op.operands[0])[1]
    if groups <= 0 or channels % groups:
        raise NotExpressible(f"a GroupNorm of {channels} channels in {groups} groups")
    inputs, affine = _affine_inputs(op, ctx, groups)
    p = GroupNormGlobal()
    p.axis = 1
    p.common.group_num, p.common.eps, p.common.affine = groups, op.value("eps"), affine
    return [ctx.call("backend_api_group_norm_global", p, op, inputs=inputs)]
