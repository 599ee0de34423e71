"""tpu.Conv2D and tpu.Deconv in integers: the kernel library's exact
convolutions (`tpuc.kernels.conv`) on records built from the op."""

from __future__ import annotations

from tpuc.dialects import tpu
from tpuc.interp.top_ops.registry import ints
from tpuc.interp.tpu_ops.params import (
    conv_geometry_of,
    element_of_value,
    library_kernel,
    requant_of,
)
from tpuc.interp.tpu_ops.registry import tpu_kernel
from tpuc.kernels import conv as lib


def conv_params(op) -> lib.Conv:
    """The record of a tpu.Conv2D or tpu.Deconv (per-channel epilogue on axis 1)."""
    return lib.Conv(
        conv_geometry_of(op),
        element_of_value(op.operands[0]),
        requant_of(op, axis=1),
        tuple(ints(op, "output_padding")),
    )


tpu_kernel(tpu.Conv2DOp)(library_kernel(conv_params, lib.conv))
tpu_kernel(tpu.DeconvOp)(library_kernel(conv_params, lib.deconv))
