"""The kernels' executor now lives in `tpuc.kernels.executor` (it imports no
IR); this name stays for `tpuc.runtime.program` until the simulator imports
the kernel library directly."""

from tpuc.kernels.executor import AUTO, SEQUENTIAL, Executor, current

__all__ = ["AUTO", "SEQUENTIAL", "Executor", "current"]
