"""Bad TFLite input: each is one `error:` line and exit status 1."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_builder import Op, T, build, one_op

from tpuc.frontends.tflite.model import load_tflite
from tpuc.tools import model_transform

RELU = one_op("RELU", [1, 4, 4, 3], [1, 4, 4, 3])


def fails(tmp_path, capsys, data: bytes, *needles: str, extra: list[str] = ()) -> str:
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    argv = ["--model_name", "m", "--model_def", str(path), "--mlir", str(tmp_path / "m.mlir")]
    with pytest.raises(SystemExit) as exc:
        model_transform.main([*argv, *extra])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for needle in needles:
        assert needle in err, err
    assert not (tmp_path / "m.mlir").exists()
    return err


def test_truncated_file(tmp_path, capsys):
    fails(tmp_path, capsys, RELU[: len(RELU) // 2], "not a valid TFLite model", "truncated")


def test_not_a_tflite_file(tmp_path, capsys):
    fails(tmp_path, capsys, b"ir_version: 8\ngraph {}\n" * 4, "not a TFLite model", "TFL3")


def test_custom_op_is_named(tmp_path, capsys):
    tensors = [T("x", [1, 4]), T("t", [1, 4]), T("axis", [1], np.array([1], np.int32)), T("y", [1])]
    ops = [
        Op("CUSTOM", [0], [1], custom="MyFancyOp"),
        Op("ARG_MAX", [1, 2], [3], ("ArgMaxOptions", {"OutputType": 2})),
    ]
    err = fails(tmp_path, capsys, build(tensors, ops, [0], [3]), "2 unsupported op type(s)")
    assert "CUSTOM:MyFancyOp (t)" in err and "ARG_MAX (y)" in err  # all listed at once


def test_custom_quantization_details_are_refused(tmp_path, capsys):
    tensors = [T("x", [1, 4]), T("y", [1, 4], scale=[0.1], custom_details=b"\x01\x02")]
    data = build(tensors, [Op("RELU", [0], [1])], [0], [1])
    fails(tmp_path, capsys, data, "tensor 'y' has custom quantization details")


def test_more_than_one_subgraph(tmp_path, capsys):
    tensors = [T("x", [1, 4]), T("y", [1, 4])]
    data = build(tensors, [Op("RELU", [0], [1])], [0], [1], subgraphs=2)
    fails(tmp_path, capsys, data, "2 subgraphs", "single-subgraph")


def test_test_input_in_the_wrong_layout(tmp_path, capsys):
    np.savez(tmp_path / "in.npz", x=np.zeros([1, 3, 4, 4], np.float32))
    fails(
        tmp_path,
        capsys,
        RELU,
        "[1, 3, 4, 4]",
        "takes NHWC",
        extra=["--test_input", str(tmp_path / "in.npz")],
    )


def test_input_shapes_in_the_wrong_layout(tmp_path, capsys):
    fails(tmp_path, capsys, RELU, "changes the channels", extra=["--input_shapes", "[[1,3,4,4]]"])


def test_input_shapes_resize_the_model(tmp_path):
    """--input_shapes in the model's NHWC layout re-shapes the whole graph."""
    pytest.importorskip("ai_edge_litert")
    path = tmp_path / "m.tflite"
    path.write_bytes(RELU)
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(0).standard_normal([1, 6, 5, 3]))
    argv = [
        "--model_name",
        "m",
        "--model_def",
        str(path),
        "--mlir",
        str(tmp_path / "m.mlir"),
        "--input_shapes",
        "[[1,6,5,3]]",
        "--test_input",
        str(tmp_path / "in.npz"),
    ]
    assert model_transform.run(argv) == 0


def test_opcode_is_the_max_of_both_fields(tmp_path):
    """Old files set only deprecated_builtin_code; codes above 127 store 127
    there and the real code in builtin_code."""
    old = build(
        [T("x", [1, 4]), T("y", [1, 4])],
        [Op("RELU", [0], [1])],
        [0],
        [1],
        deprecated_codes_only=True,
    )
    (tmp_path / "old.tflite").write_bytes(old)
    assert load_tflite(str(tmp_path / "old.tflite")).operators[0].op == "RELU"
    new = one_op("GELU", [1, 4], [1, 4])
    (tmp_path / "new.tflite").write_bytes(new)
    assert load_tflite(str(tmp_path / "new.tflite")).operators[0].op == "GELU"


def test_model_runner_runs_tflite(tmp_path):
    pytest.importorskip("ai_edge_litert")
    from tpuc.tools import model_runner

    (tmp_path / "m.tflite").write_bytes(RELU)
    x = np.random.default_rng(1).standard_normal([1, 4, 4, 3]).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    argv = [
        "--model",
        str(tmp_path / "m.tflite"),
        "--input",
        str(tmp_path / "in.npz"),
        "--output",
        str(tmp_path / "out.npz"),
    ]
    assert model_runner.run(argv) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], np.maximum(x, 0))
