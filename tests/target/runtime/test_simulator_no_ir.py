"""The device simulator runs a bmodel on the instruction set and the kernel
library alone: loading and running one in a fresh interpreter loads no xDSL,
no dialect and no interpreter (the import contract `simulator-no-ir` checks
the static imports; this checks what a real run loads)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tpuc.tools import model_deploy

SCRIPT = """
import sys
import numpy as np
from tpuc.target.runtime import load_bmodel

program = load_bmodel(sys.argv[1])
x = np.load(sys.argv[2])["x"]
outputs = program.run({"x": x})
assert outputs and all(np.isfinite(v).all() for v in outputs.values())
loaded = sorted(
    m for m in sys.modules
    if m == "xdsl" or m.startswith(("xdsl.", "tpuc.dialects", "tpuc.interp", "tpuc.passes"))
)
print(",".join(loaded))
"""


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_running_a_bmodel_loads_no_ir(prepared, tmp_path, mode):
    bmodel = tmp_path / "cnn.bmodel"
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", mode]
    if mode == "INT8":
        argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    assert model_deploy.run([*argv, "--model", str(bmodel)]) == 0
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(bmodel), str(prepared / "in.npz")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
