"""Kernels of the TPU dialect, keyed by (op class, kind): see `registry`.

Importing this package registers every kernel family in `TPU_KERNELS`.
`data_ops` claims the Max/Min modes of tpu.Pool2D and tpu.Reduce at a
higher priority and hands the other modes to the compute kernels below.
"""

from tpuc.interp.tpu_ops import (  # noqa: F401  (imported to register kernels)
    cast_ops,
    compute,
    data_ops,
    float_ops,
    half_ops,
)
from tpuc.interp.tpu_ops.registry import TPU_KERNELS, tpu_kernel

__all__ = ["TPU_KERNELS", "kind_of", "tpu_kernel"]
