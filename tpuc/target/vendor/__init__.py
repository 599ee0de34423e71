"""The vendor component: SOPHGO's backend library, chip model and runtime
from the tpu-mlir wheel, fetched on demand, driven in worker processes.

Nothing here imports IR: the native code generator (tpuc.passes.native)
hands this package parameter structs and tensor specs as bytes, and the
tools hand it bmodel files and arrays. The vendor libraries keep global
state, print to stdout and kill their process on a bad call, so they only
ever run in a worker process (`tpuc.target.vendor.worker`).
"""

from tpuc.target.vendor.fetch import VENDOR_VERSION, VendorPaths, cache_dir, locate

# `fetch` stays a module name (tpuc.target.vendor.fetch.fetch downloads)
__all__: list[str] = ["VENDOR_VERSION", "VendorPaths", "cache_dir", "locate"]
