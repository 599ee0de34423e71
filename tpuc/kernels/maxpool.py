"""Integer max pooling on stored values (tpu.Pool2D Max), without IR.

A max only moves stored integers, so input and result share one quantized
type: the window max (padding never wins: −inf), then the fused ReLU on
stored integers (`Pool.requant.relu`; its multiplier is unused). Kept in
its own module until the data-movement family moves into the library.
"""

from __future__ import annotations

import numpy as np

from tpuc.kernels.arrays import Array
from tpuc.kernels.executor import current
from tpuc.kernels.pool_window import padded_input, window_reduce
from tpuc.kernels.requant import relu_int
from tpuc.kernels.sums import Pool


def max_pool(p: Pool, x: Array) -> Array:
    g = p.geometry(x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        y = x.max(axis=spatial, keepdims=True)
    else:
        out = current().empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out))
        y = window_reduce(padded_input(x, g, -np.inf), g, np.maximum, out)
    return relu_int(p.requant.relu, np.asarray(y, np.float32), p.requant.out)
