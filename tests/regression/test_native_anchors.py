"""regression/native_anchors.py: its rows read model_deploy's own lines
(groups, cycles, verdict) and hold them to TPU-MLIR's cycles; with the
anchor models, smallcnn INT8 deployed natively with layer groups on passes
bit for bit against the TPU interpreter in the vendor runtime."""

import pytest
from native_anchors import TPUMLIR, groups, main, versus

SAID = (
    "[model_deploy.py] layer groups: 3 (ops 4, 22, 12; slices n x h x w 1x4x1, 1x1x1, 1x1x1)\n"
    "[model_deploy.py] estimated latency: 106.7 µs on bm1684x (106,663 cycles, the vendor "
    "library's estimate)\n"
)


def test_groups_are_counted_per_slicing():
    assert groups(SAID) == "3: 2x 1x1x1, 1x 1x4x1"
    assert groups("[model_deploy.py] layer groups: none (every op a global layer)") == "none"
    assert groups("error: no such file") == "-"


def test_rows_are_held_to_tpumlirs_cycles_of_the_same_mode():
    assert versus("squeezenet", "INT8", "106,663") == ("109,079", "0.98")
    assert versus("squeezenet", "F16", "196,438") == ("196,438", "1.00")
    assert versus("squeezenet", "F32", "1,000") == ("-", "-")
    assert versus("squeezenet", "INT8", "-") == ("109,079", "-")
    assert all(len(figures) == 3 for figures in TPUMLIR.values())


@pytest.mark.models
def test_smallcnn_int8_with_layer_groups_is_bit_exact(anchors, tmp_path, capsys):
    code = main(["--anchors", str(anchors), "--models", "smallcnn", "--modes", "INT8",
                 "--work", str(tmp_path)])  # fmt: skip
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 0, row
    assert "| smallcnn | INT8 | (bit for bit" in row
    assert "| 16,298 |" in row  # TPU-MLIR's cycles, with the ratio after them
    assert "| 1: 1x 1x1x1 | bit-equal |" in row
