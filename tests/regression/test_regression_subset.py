"""A small subset of regression/run_transform.py in CI: real architectures
from the onnx package (seeded weights) through model_transform.py, every
tensor compared with onnxruntime at cosine >= 0.99999."""

import pytest
from model_zoo import light_model  # noqa: E402
from run_transform import MIN_COS, measure  # noqa: E402


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_light_model_matches_onnxruntime_on_every_tensor(name, tmp_path):
    row = measure(light_model(name), tmp_path)
    assert not row.error, row.error
    assert row.compared > 20
    assert row.min_cos >= MIN_COS, f"{row.worst}: cos {row.min_cos}"
    assert row.outputs_cos >= MIN_COS
