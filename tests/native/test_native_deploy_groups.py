"""model_deploy.py --codegen native with layer groups: the layer-group search
runs for the native target with the vendor's cycles as prices, the chosen
groups are in `_final.mlir` as tpu.Group ops, the native codegen writes them
as the chip's local commands, and the bmodel run in the vendor runtime
equals the TPU interpreter bit for bit in INT8 (model_deploy checks it; the
test compares the saved outputs again). --disable_layer_group keeps every
op a global layer. The vendor component must be in the cache (the `vendor`
fixture fails without it).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from local_groups import chain_onnx

from tpuc.tools import model_deploy


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_deploy_groups")
    mlir, table = chain_onnx(work)
    return work, mlir, table


def deploy(chain, extra=()) -> None:
    work, mlir, table = chain
    argv = ["--mlir", mlir, "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", table, "--test_input", str(work / "in.npz")]
    argv += ["--tolerance", "0.9,0.5", "--codegen", "native", "--model", str(work / "m.bmodel")]
    assert model_deploy.run([*argv, *extra]) == 0


def outputs(work, name: str) -> dict:
    return dict(np.load(work / f"chain_bm1684x_int8_sym_{name}.npz"))


def test_groups_formed_and_bit_exact(chain, vendor, capsys):
    work = chain[0]
    deploy(chain)
    said = capsys.readouterr().out
    found = re.search(r"layer groups: (\d+) \(ops ([\d, ]+);", said)
    assert found, said
    assert int(found.group(1)) >= 1
    assert "bmodel matches the TPU interpreter (bit for bit" in said
    final = (work / "chain_bm1684x_int8_sym_final.mlir").read_text()
    assert final.count('"tpu.Group"') == int(found.group(1))
    native, interp = outputs(work, "model_outputs"), outputs(work, "tpu_outputs")
    for name, value in native.items():
        assert np.array_equal(value, interp[name]), name
    cycles = int(re.search(r"\(([\d,]+) cycles", said).group(1).replace(",", ""))
    deploy(chain, ["--disable_layer_group"])
    said = capsys.readouterr().out
    assert "layer groups: none" in said
    assert '"tpu.Group"' not in (work / "chain_bm1684x_int8_sym_final.mlir").read_text()
    assert "bmodel matches the TPU interpreter (bit for bit" in said
    all_global = int(re.search(r"\(([\d,]+) cycles", said).group(1).replace(",", ""))
    assert cycles < all_global  # the planner keeps a group only when the vendor says it pays
