"""ONNX initializers that cannot become float32 weights end with one line
naming the tensor, never a numpy traceback or a silently changed value."""

from __future__ import annotations

import pytest
from bad_inputs import add_model, int64_initializer, short_raw_initializer, string_initializer
from tools_helpers import run_main

from tpuc.tools.model_transform import main


@pytest.mark.parametrize(
    "initializer, message",
    [
        (string_initializer(), "weight 'W' holds strings; only numeric tensors can be weights"),
        (short_raw_initializer(), "initializer 'W' has 6 bytes of data, its dims [4] need 16"),
        (
            int64_initializer([0, 1, 2, 2**40 + 1]),
            "weight 'W' (int64) holds 1099511627777, which float32 cannot represent exactly "
            "(1 such value(s))",
        ),
    ],
)
def test_bad_initializer(tmp_path, capsys, initializer, message):
    model = add_model(tmp_path / "m.onnx", initializer)
    argv = ["--model_name", "m", "--model_def", str(model), "--mlir", str(tmp_path / "m.mlir")]
    code, _, err = run_main(main, argv, capsys)
    assert (code, err) == (1, f"error: {model}: {message}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_int64_weight_that_converts_exactly(tmp_path, capsys):
    model = add_model(tmp_path / "m.onnx", int64_initializer([0, 1, -(2**24), 2**24]))
    argv = ["--model_name", "m", "--model_def", str(model), "--mlir", str(tmp_path / "m.mlir")]
    assert run_main(main, argv, capsys)[0] == 0
