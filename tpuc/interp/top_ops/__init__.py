"""Float32 numpy kernels of the TOP dialect, keyed by op class.

Importing this package registers every kernel family in `KERNELS`.
"""

from tpuc.interp.top_ops import (  # noqa: F401  (imported to register kernels)
    activation,
    conv,
    data,
    elementwise,
    norm,
    pool,
    reduce,
    resize,
    rnn,
)
from tpuc.interp.top_ops.registry import KERNELS, kernel

__all__ = ["KERNELS", "kernel"]
