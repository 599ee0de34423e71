"""INT8 grouped 1x1 convolutions run dense in layer groups.

TPU-MLIR's final module has shufflenet's first 1x1 group-4 convolution
(24 -> 112 channels) as an ordinary one (group 1): with every input
channel in one pass of the lanes (IC_PARALLEL), a block-diagonal filter
costs one pass where the kernel's own groups cost one a group (and a
scratch buffer to regroup the input). The int32 sums are the same: the
added taps are zeros. ops.py's Conv2D rule packs the filter this way and
sets the local call's groups to 1 when `dense_groups` says so.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import quant_of

DENSE_IC = 64  # input channels one pass of an INT8 convolution covers (IC_PARALLEL)


def dense_groups(op: Operation) -> bool:
    """Whether an INT8 grouped (not depthwise) 1x1 convolution of at most
    DENSE_IC input channels runs as an ordinary one."""
    from tpuc.passes.native.conv import is_depthwise

    if (op.value("group") or 1) == 1 or is_depthwise(op) or quant_of(op.operands[0]) is None:
        return False
    return list(op.value("kernel_shape")) == [1, 1] and shape_of(op.operands[0])[1] <= DENSE_IC


def block_diagonal(filt: np.ndarray, groups: int) -> np.ndarray:
    """[oc, ic/g, k] -> [oc, ic, k]: each output channel's taps at its
    group's input channels, zeros elsewhere."""
    oc, icg, k = filt.shape
    ocg = oc // groups
    dense = np.zeros((oc, icg * groups, k), filt.dtype)
    for g in range(groups):
        dense[g * ocg : (g + 1) * ocg, g * icg : (g + 1) * icg] = filt[g * ocg : (g + 1) * ocg]
    return dense


__all__ = ["DENSE_IC", "block_diagonal", "dense_groups"]
