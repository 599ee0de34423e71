"""The vendor library's parameter structs, declared once as ctypes types.

Each declaration names its C typedef in Param.h and lists its fields in a
short C-like form (`"i32 groups; f32 upper_limit; i32 shape[8]"`, nested
structs by their Python name). `check_params` compares every declaration
with the pinned header (size, field names, offsets) before the driver calls
the library, since the library accepts a wrong-sized struct silently. A
declared struct refuses unknown field names, so a misspelt field is an
error, not a silently ignored Python attribute.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import ClassVar

from tpuc.base.errors import TpucError

_SCALAR_TYPES: dict[str, type] = {
    "i8": ctypes.c_int8,
    "u8": ctypes.c_uint8,
    "i16": ctypes.c_int16,
    "u16": ctypes.c_uint16,
    "i32": ctypes.c_int32,
    "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "bool": ctypes.c_bool,
    "ptr": ctypes.c_void_p,
}
_FIELD = re.compile(r"^(\w+)\s+(\w+)((?:\[\d+\])*)$")


class Param(ctypes.Structure):
    """A vendor parameter struct: knows its typedef, refuses unknown fields."""

    typedef: ClassVar[str] = ""

    def __setattr__(self, name: str, value) -> None:
        if name not in {f[0] for f in type(self)._fields_}:
            raise AttributeError(f"{self.typedef} has no field '{name}'")
        super().__setattr__(name, value)

    def to_bytes(self) -> bytes:
        return ctypes.string_at(ctypes.addressof(self), ctypes.sizeof(self))


DECLARED: dict[str, type[Param]] = {}


def declare(typedef: str, fields: str) -> type[Param]:
    """A Param type for C typedef `typedef` with `fields` ("type name[dims]; …")."""
    ctypes_fields = []
    for item in filter(None, (part.strip() for part in fields.split(";"))):
        match = _FIELD.match(item)
        if match is None:
            raise TpucError(f"params: cannot read field '{item}' of {typedef}")
        kind, name, dims = match.groups()
        ctype = _SCALAR_TYPES.get(kind) or DECLARED[kind]
        for dim in reversed(re.findall(r"\d+", dims)):
            ctype = ctype * int(dim)
        ctypes_fields.append((name, ctype))
    cls = type(typedef, (Param,), {"_fields_": ctypes_fields, "typedef": typedef})
    DECLARED[typedef] = cls
    return cls


def check_params(header: Path, names: list[str] | None = None) -> None:
    """Every declared struct (or those named) laid out as in `header`."""
    from tpuc.target.vendor.header import header_layouts

    layouts = header_layouts(header)
    wrong = []
    for typedef in names or sorted(DECLARED):
        cls = DECLARED[typedef]
        layout = layouts.layout(typedef)
        ours = tuple((name, getattr(cls, name).offset) for name, _ in cls._fields_)
        if ctypes.sizeof(cls) != layout.size or ours != layout.fields:
            wrong.append(f"{typedef} ({ctypes.sizeof(cls)} bytes, header {layout.size})")
    if wrong:
        raise TpucError(
            f"{header}: tpuc's parameter structs do not match the vendor header: "
            + ", ".join(wrong)
        )


# --- tensors ------------------------------------------------------------------------------

TensorSpec = declare(
    "tensor_spec_t",
    "u64 addr; i32 dtype; i32 dims; i32 shape[8]; u32 hw_margins; u8 consume_num; "
    "ptr host_data; i32 elem_num",
)

# --- convolution --------------------------------------------------------------------------

declare(
    "nnvlc_common_spec_t",
    "i32 do_compress; i32 do_decompress; i32 bias0; i32 bias1; i32 zero_guard",
)
declare(
    "conv_common_spec_t",
    "i32 groups; i32 input_c; i32 output_c; i32 kh; i32 kw; i32 stride_h; i32 stride_w; "
    "i32 dh; i32 dw; i32 pad_h_t; i32 pad_h_b; i32 pad_w_l; i32 pad_w_r; i32 has_bias; "
    "i32 if_relu; f32 upper_limit; i32 rshift; i32 round_mode; i32 is_asym; i32 kzp_is_const; "
    "i32 kzp_value; i32 ipad_is_const; i32 ipad_value; i32 bias_sign; i32 use_3ic_optimize; "
    "i32 weight_is_coeff; i32 weight_bits; nnvlc_common_spec_t nnvlc_param",
)
ConvGlobal = declare(
    "conv_global_spec_t",
    "conv_common_spec_t common; i32 merge_coeff; i32 weight_is_tensor; i32 using_multicore",
)

declare(
    "conv_local_spec_t",
    "conv_common_spec_t common; u32 buffer_local_addr; i32 result_add; i32 unused_ht_for_input; "
    "i32 unused_hb_for_input; i32 unused_wl_for_input; i32 unused_wr_for_input; "
    "i32 group_one_conv; i32 with_requant; i32 merge_coeff; u32 concat_c; i32 concat_c_idx; "
    "i32 reference_id",
)
ConvLocal = declare("conv_local_param_t", "conv_local_spec_t spec")

# --- elementwise --------------------------------------------------------------------------

declare(
    "bcbinary_common_spec_t",
    "i32 binary_type; i32 if_relu; f32 relu_upper_limit; i32 scale_A; i32 scale_B; "
    "i32 rshift_A; i32 rshift_B; f32 f8_scale_A; f32 f8_scale_B; i32 izp_A; i32 izp_B; i32 ozp",
)
BcBinaryGlobal = declare(
    "bcbinary_global_param_t", "bcbinary_common_spec_t spec; i32 A_is_coeff; i32 B_is_coeff"
)
declare("bcbinary_local_spec_t", "bcbinary_common_spec_t common; u32 buffer_addr")
BcBinaryLocal = declare(
    "bcbinary_local_param_t", "bcbinary_local_spec_t spec; i32 A_is_coeff; i32 B_is_coeff"
)
declare(
    "constbinary_common_spec_t",
    "f32 B_const_val; i32 B_dtype; i32 inversed; i32 binary_type; i32 if_relu; "
    "f32 relu_upper_limit; i32 scale_A; i32 rshift_A; f32 f8_scale_A; i32 zp_out",
)
ConstBinaryGlobal = declare("constbinary_global_spec_t", "constbinary_common_spec_t common")
declare("active_common_spec_t", "i32 active_type; f32 coeffs[8]")
ActiveGlobal = declare("active_global_spec_t", "active_common_spec_t common")
ActiveLocal = declare("active_local_spec_t", "active_common_spec_t common; u32 buffer_addr")

# --- pooling, matmul ---------------------------------------------------------------------

PoolingCommon = declare(
    "pooling_common_spec_t",
    "i32 kh; i32 kw; i32 pad_h_t; i32 pad_h_b; i32 pad_w_l; i32 pad_w_r; i32 stride_h; "
    "i32 stride_w; i32 dh; i32 dw; i32 is_global_pooling; i32 is_avg_pooling; "
    "i32 is_adaptive_pooling; i32 avg_pooling_mode; i32 if_relu; f32 relu_limit; i32 ceil_mode; "
    "i32 round_mode; i32 avg_pooling_quant_mode; i32 max_pooling_with_mask; i32 multiplier; "
    "i32 rshiftbits; i32 merge_requant; f32 rq_scale; f32 rq_offset; i32 src_round_mode",
)
PoolingLocal = declare("pooling_local_spec_t", "i32 buffer_addr; pooling_common_spec_t common")
FcGlobal = declare(
    "fc_global_spec_t",
    "i32 R_transpose; i32 have_bias; i32 if_relu; f32 relu_limit; i32 rshift; i32 is_asymmetric; "
    "i32 rzp_const_val; i32 rzp_is_const; i32 izp_const_val; i32 requant_mode; i32 mul_val; "
    "i32 shift_val; i32 offset_val; i32 round_mode; i32 fuse_rq; i32 if_getting_buffer_size; "
    "ptr buffer_size_ptr; i32 need_buffer",
)

__all__ = [
    "ActiveLocal",
    "BcBinaryLocal",
    "ConvLocal",
    "PoolingLocal",
    "FcGlobal",
    "PoolingCommon",
    "DECLARED",
    "ActiveGlobal",
    "BcBinaryGlobal",
    "ConstBinaryGlobal",
    "ConvGlobal",
    "Param",
    "TensorSpec",
    "check_params",
    "declare",
]
