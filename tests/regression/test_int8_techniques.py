"""The measures of regression/int8_techniques.py and int8_safety.py against
hand-computed cases: greedy CTC text, RapidOCR's rec input, and the COCO
AP of detections evaluated against FP32's."""

from __future__ import annotations

import numpy as np
import pytest
from int8_safety import EVAL_MIN, Case, coco_ap, detections
from int8_techniques import ctc_text, rec_input


def one_hot(best: list[int], classes: int = 6) -> np.ndarray:
    probs = np.full((1, len(best), classes), 0.01, np.float32)
    probs[0, np.arange(len(best)), best] = 0.9
    return probs


def test_ctc_merges_repeats_and_drops_blanks():
    # steps: blank, a, a, blank, a, b, b, blank -> "a a b" (a repeat split by a blank stays)
    assert ctc_text(one_hot([0, 3, 3, 0, 3, 5, 5, 0])) == (3, 3, 5)
    assert ctc_text(one_hot([0, 0, 0])) == ()


def test_rec_input_keeps_aspect_and_pads_with_zero():
    crop = np.full((24, 40), 255, np.uint8)  # white, 40/24 wide: 48 x 80 after resizing
    x = rec_input(crop)
    assert x.shape == (1, 3, 48, 320)
    assert np.all(x[..., :80] == 1.0)  # (255/255 - 0.5) / 0.5
    assert np.all(x[..., 80:] == 0.0)
    assert rec_input(np.zeros((10, 1000), np.uint8))[..., -1].min() == -1.0  # capped at 320


def yolo_output(boxes: list[tuple], classes: int = 2) -> dict:
    """A YOLOv8 output [1, 4 + classes, N] from (cx, cy, w, h, class, score)."""
    out = np.zeros((1, 4 + classes, len(boxes)), np.float32)
    for i, (cx, cy, w, h, cls, score) in enumerate(boxes):
        out[0, :4, i] = cx, cy, w, h
        out[0, 4 + cls, i] = score
    return {"output0": out}


def test_detections_below_the_deployment_cut_count_when_evaluated():
    """FP32 finds a box at 0.259; INT8 scores it 0.247 (same place): at the
    deployment cut (0.25) INT8 misses it, evaluated from 0.001 it matches."""
    case = Case("yolo", None, None, "detect")
    ref = detections(case, yolo_output([(50, 50, 20, 20, 0, 0.9), (150, 150, 20, 20, 1, 0.259)]))
    int8 = yolo_output([(50, 50, 20, 20, 0, 0.9), (150, 150, 20, 20, 1, 0.247)])
    assert len(ref) == 2
    assert coco_ap([(ref, detections(case, int8))])[0] == pytest.approx(0.5, abs=0.01)
    assert coco_ap([(ref, detections(case, int8, EVAL_MIN))])[0] == pytest.approx(1.0)


def test_a_shifted_box_loses_the_strict_iou_thresholds():
    """A 20 px box moved by 1 px: IoU 19·20/(2·400 − 380) = 0.905, so it
    matches at IoU 0.50–0.90 (9 of COCO's 10 thresholds), not at 0.95."""
    case = Case("yolo", None, None, "detect")
    ref = detections(case, yolo_output([(50, 50, 20, 20, 0, 0.9)]))
    got = detections(case, yolo_output([(51, 50, 20, 20, 0, 0.9)]), EVAL_MIN)
    assert coco_ap([(ref, got)])[0] == pytest.approx(0.9, abs=0.01)


def test_rec_calibration_lines_are_text_lines_but_not_the_test_lines():
    """rec calibrates on rendered text lines: grey uint8 crops cut as the
    test lines are (8–40 px tall, dark ink on light paper), deterministic,
    and none of them is one of the skimage lines the test measures."""
    from int8_techniques import rendered_lines, text_lines

    cali = rendered_lines(4)
    assert len(cali) == 4
    tests = text_lines()
    for crop, again in zip(cali, rendered_lines(4), strict=True):
        assert crop.dtype == np.uint8 and crop.ndim == 2
        assert 8 <= crop.shape[0] <= 40 and crop.shape[1] >= 40
        assert np.array_equal(crop, again)
        assert np.percentile(crop, 5) < np.median(crop) - 40  # ink darker than the paper
        assert not any(t.shape == crop.shape and np.array_equal(t, crop) for t in tests)


def test_fake_quant_grid_of_the_rec_diagnosis():
    """8 bits at threshold 1: signed steps of 1/127, unsigned of 1/255;
    beyond the threshold clipped; 12 bits: steps of 1/2047."""
    from rec_int8_loss import on_grid

    from tpuc.base.cali_table import CaliEntry

    signed, unsigned = CaliEntry(1.0, -0.5, 2.0), CaliEntry(1.0, 0.0, 2.0)
    x = np.array([0.2, -3.0, 3.0, 0.004], np.float32)  # 0.2: 25.4 / 51.0 / 409.4 steps
    assert np.allclose(on_grid(x, signed, 8), [25 / 127, -1.0, 1.0, 1 / 127])
    assert np.allclose(on_grid(x, unsigned, 8), [51 / 255, 0.0, 1.0, 1 / 255])
    assert np.allclose(on_grid(np.float32(0.2), signed, 12), 409 / 2047)
