"""The per-op suite in CI: every supported ONNX op as a one-node model,
through model_transform, run_calibration and model_deploy in each bm1684x
mode (F32, F16, BF16, INT8 symmetric and asymmetric); model_deploy compares
the TPU interpreter with TOP under the mode's tolerance."""

import pytest
from op_suite import CASES, MODES, run_case  # noqa: E402


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_deploys_in_every_mode(case, tmp_path):
    outcomes = run_case(case, tmp_path, list(MODES))
    failed = [f"{o.mode}: {o.message}" for o in outcomes if not o.ok]
    assert not failed, "; ".join(failed)
    assert len(outcomes) == len(MODES)
