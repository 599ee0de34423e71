"""The kernel library loads without xDSL: importing every module of
`tpuc.kernels` in a fresh interpreter leaves `xdsl` out of sys.modules."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import tpuc.kernels
for info in pkgutil.walk_packages(tpuc.kernels.__path__, "tpuc.kernels."):
    importlib.import_module(info.name)
loaded = sorted(m for m in sys.modules if m == "xdsl" or m.startswith(("xdsl.", "tpuc.dialects")))
print(",".join(loaded))
"""


def test_kernel_library_imports_no_xdsl():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == ""
