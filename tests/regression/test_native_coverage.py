"""The onnxruntime path against the numpy path on a seeded sample of ONNX's
backend cases (regression/native_coverage.py runs them all, ~850)."""

from native_coverage import main


def test_native_path_matches_numpy_on_a_sample_of_onnx_cases(capsys):
    code = main(["--sample", "120", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 cases where the onnxruntime path differs or fails" in out
    assert "top.Conv" in out.split("ops run natively:")[1]
