"""The "3ic" INT8 convolution (TPU-MLIR's `use_3ic_optimize`, BM1684X
WeightReorder/Conv2D.cpp `reorder_8bit` and `reshape_coeff_for_3ic`).

A convolution whose input channels leave most of the 64-lane input
parallelism empty (an image's first layer: 3 channels) folds kernel rows,
columns or both into the input channels: the filter [oc, ic, kh, kw] is
read as [oc, ic·kh, 1, kw] (mode 1), [oc, ic·kw, 1, kh] after swapping kh
and kw (mode 2) or [oc, ic·kh·kw, 1, 1] (mode 3), then blocked by 64 input
channels as any INT8 filter. The call keeps the convolution's own geometry;
the flag tells the kernel to gather the folded input itself. Modes, in
TPU-MLIR's order of preference:

- 3 when ic·kh·kw <= 64 and both kh, kw > 1;
- 2 when ic·kw <= 64, kw > 1 and (kh < kw or ic·kh > 64);
- 1 when ic·kh <= 64 and kh > 1;
- 0 (none) otherwise, and for grouped convolutions.

Bit 0x30 (the input has other readers: the kernel broadcasts it into a
buffer with the TIU instead of overwriting it) follows TPU-MLIR too. Only
INT8: TPU-MLIR keeps it off for F16/BF16.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.kernels.half_conv import fold_mode

IC_PARALLEL = 64  # int8 input channels one lane multiplies at once (BM1684X)
OTHER_READERS = 0x30


def three_ic_mode(ic: int, kh: int, kw: int) -> int:
    """TPU-MLIR's choice of fold (0: none) for an INT8 filter."""
    return fold_mode(ic, kh, kw, IC_PARALLEL)


def folded_filter(filt: np.ndarray, mode: int, kh: int, kw: int) -> np.ndarray:
    """[oc, ic, kh·kw] -> [oc, ic', k'] with the mode's dims folded into ic'."""
    oc, ic, _ = filt.shape
    if mode == 1:
        return filt.reshape(oc, ic * kh, kw)
    if mode == 2:
        return filt.reshape(oc, ic, kh, kw).transpose(0, 1, 3, 2).reshape(oc, ic * kw, kh)
    if mode == 3:
        return filt.reshape(oc, ic * kh * kw, 1)
    return filt


def fold_3ic(op: Operation, filt: np.ndarray) -> tuple[int, np.ndarray]:
    """(use_3ic_optimize, the filter as the kernel reads it) of an ungrouped
    INT8 Conv2D whose filter is `filt` [oc, ic, kh·kw]."""
    kh, kw = op.value("kernel_shape")
    mode = three_ic_mode(filt.shape[1], kh, kw)
    if not mode:
        return 0, filt
    flag = mode | (OTHER_READERS if len(list(op.operands[0].uses)) > 1 else 0)
    return flag, folded_filter(filt, mode, kh, kw)


__all__ = ["fold_3ic", "folded_filter", "three_ic_mode"]
