"""model_eval.py on real data (scikit-learn's digits): every stage of one
model scored on identical inputs, against onnxruntime plus a hand count."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime
import pytest

from tests.support.digits import SCALE, linear_classifier, write_image_folder
from tests.support.tools_helpers import one_line_error, run_main
from tpuc.tools import model_deploy, model_eval, model_transform, run_calibration

BATCH = 16


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """All 1797 digits as an ImageFolder tree, the classifier's ONNX, TOP,
    INT8 TPU module and INT8 bmodel."""
    work = tmp_path_factory.mktemp("digits")
    images, labels = write_image_folder(work / "data")
    onnx_path = linear_classifier(work / "d.onnx", BATCH)
    np.savez(work / "in.npz", x=images[:BATCH, None].astype(np.float32) * SCALE)
    cali = work / "cali"
    cali.mkdir()
    for digit in range(10):
        for png in sorted((work / "data" / str(digit)).glob("*.png"))[:3]:
            (cali / png.name).write_bytes(png.read_bytes())
    argv = ["--model_name", "d", "--model_def", str(onnx_path), "--mlir", str(work / "d.mlir")]
    argv += ["--pixel_format", "gray", "--scale", repr(SCALE), "--test_input", str(work / "in.npz")]
    assert model_transform.run(argv) == 0
    table = str(work / "d_cali")
    assert run_calibration.run([str(work / "d.mlir"), "--dataset", str(cali), "-o", table]) == 0
    argv = ["--mlir", str(work / "d.mlir"), "--quantize", "INT8", "--chip", "bm1684x"]
    argv += ["--calibration_table", table, "--test_input", str(work / "in.npz")]
    argv += ["--model", str(work / "d.bmodel")]
    assert model_deploy.run(argv) == 0
    return work, images, labels


def hand_count(onnx_path, images, labels) -> tuple[int, int]:
    """Top-1 / top-5 hits of onnxruntime on the digits scaled as the model was."""
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    x = images[:, None].astype(np.float32) * np.float32(SCALE)
    pad = (-len(x)) % BATCH
    x = np.concatenate([x, np.repeat(x[-1:], pad, axis=0)])
    logits = np.concatenate(
        [session.run(None, {"x": x[i : i + BATCH]})[0] for i in range(0, len(x), BATCH)]
    )[: len(labels)]
    top1 = top5 = 0
    for row, label in zip(logits, labels, strict=True):
        ranked = sorted(range(10), key=lambda c: (-row[c], c))
        top1 += ranked[0] == label
        top5 += label in ranked[:5]
    return top1, top5


def stage_rows(out: str) -> dict[str, list[float]]:
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) == 4 and cells[0] != "model" and all(c[0].isdigit() for c in cells[1:]):
            rows[cells[0].rsplit("/", 1)[-1]] = [float(c) for c in cells[1:]]
    return rows


def test_every_stage_scores_the_digits_like_onnxruntime(digits, capsys):
    work, images, labels = digits
    tpu = next(work.glob("d_bm1684x_int8_sym_tpu.mlir"))
    stages = ",".join(str(p) for p in (work / "d.onnx", work / "d.mlir", tpu, work / "d.bmodel"))
    argv = ["--stages", stages, "--dataset", str(work / "data"), "--postprocess_type", "topx"]
    code, out, err = run_main(model_eval.main, argv + ["--no_progress"], capsys)
    assert code == 0, err
    rows = stage_rows(out)
    assert len(rows) == 4, out
    top1, top5 = hand_count(work / "d.onnx", images, labels)
    n = len(labels)
    assert n == 1797
    float_row = [n, round(top1 / n, 4), round(top5 / n, 4)]
    assert rows["d.onnx"] == float_row
    assert rows["d.mlir"] == float_row
    assert rows[tpu.name] == rows["d.bmodel"]  # the simulator is bit-exact with the interpreter
    assert abs(rows["d.bmodel"][1] - float_row[1]) < 0.02  # INT8 keeps the accuracy
    assert top1 / n > 0.9  # a real classifier, not chance


def test_quantized_io_bmodel_scores_as_its_tpu_module(digits, capsys):
    """A bmodel with int8 edges (--quant_input --quant_output): model_eval feeds
    it the preprocessed float images (the runtime quantizes them with the
    bmodel's input scale) and reads its int8 logits dequantized."""
    work, _, _ = digits
    folder = work / "quant_io"
    argv = ["--mlir", str(work / "d.mlir"), "--quantize", "INT8", "--chip", "bm1684x"]
    argv += ["--calibration_table", str(work / "d_cali"), "--test_input", str(work / "in.npz")]
    argv += ["--model", str(folder / "dq.bmodel"), "--quant_input", "--quant_output"]
    assert model_deploy.run(argv) == 0
    tpu = next(work.glob("d_bm1684x_int8_sym_tpu.mlir"))
    stages = ",".join(str(p) for p in (work / "d.mlir", tpu, folder / "dq.bmodel"))
    argv = ["--stages", stages, "--dataset", str(work / "data"), "--postprocess_type", "topx"]
    code, out, err = run_main(model_eval.main, argv + ["--no_progress"], capsys)
    assert code == 0, err
    rows = stage_rows(out)
    assert rows[tpu.name] == rows["dq.bmodel"]


def test_padding_is_not_scored(digits, capsys):
    work, images, labels = digits
    count = 21  # one full batch and one padded with 11 repeats
    argv = ["--model_file", str(work / "d.mlir"), "--dataset", str(work / "data")]
    argv += ["--postprocess_type", "topx", "--count", str(count), "--no_progress"]
    code, out, err = run_main(model_eval.main, argv, capsys)
    assert code == 0, err
    assert f"count {count}," in out


def test_label_file_and_data_list(digits, tmp_path, capsys):
    work, _, labels = digits
    pngs = sorted((work / "data").glob("*/*.png"))[:40]
    (tmp_path / "list.txt").write_text("\n".join(str(p) for p in pngs))
    (tmp_path / "labels.txt").write_text("\n".join(p.parent.name for p in pngs))
    argv = ["--model_file", str(work / "d.onnx"), "--data_list", str(tmp_path / "list.txt")]
    argv += ["--label_file", str(tmp_path / "labels.txt"), "--postprocess_type", "topx"]
    argv += ["--dataset_type", "user_define", "--mlir", str(work / "d.mlir"), "--no_progress"]
    code, out, err = run_main(model_eval.main, argv, capsys)
    assert code == 0, err
    assert "count 40," in out
    (tmp_path / "labels.txt").write_text("\n".join(p.parent.name for p in pngs[:39]))
    code, _, err = run_main(model_eval.main, argv, capsys)
    assert code == 1
    assert "39 label(s) for 40 image(s)" in one_line_error(err)


def test_bad_datasets_are_one_line_errors(digits, tmp_path, capsys):
    work, _, _ = digits
    (tmp_path / "empty").mkdir()
    base = ["--model_file", str(work / "d.mlir"), "--no_progress"]
    argv = base + ["--dataset", str(tmp_path / "empty"), "--postprocess_type", "topx"]
    code, _, err = run_main(model_eval.main, argv, capsys)
    assert code == 1 and "no images" in one_line_error(err)
    (tmp_path / "bad.json").write_text("{not json")
    argv = base + ["--dataset", str(tmp_path), "--dataset_type", "coco"]
    argv += ["--postprocess_type", "coco_mAP", "--label_file", str(tmp_path / "bad.json")]
    code, _, err = run_main(model_eval.main, argv, capsys)
    assert code == 1 and "not valid JSON" in one_line_error(err)
    (tmp_path / "bad.json").write_text(json.dumps({"images": []}))
    code, _, err = run_main(model_eval.main, argv, capsys)
    assert code == 1 and "not a COCO annotation file" in one_line_error(err)


def test_coco_ap_of_float_and_int8(tmp_path, capsys):
    """skimage's coins as a COCO set; the oracle detector's AP is exactly 1 in
    float (boxes mapped back through the resize); in INT8 the box Add keeps
    its float fallback (its 0*mean operand spans no range next to the boxes,
    INT8 lowering's within_int8_span rule), so AP stays high; and the bmodel
    scores as its TPU module."""
    from tests.support.coins import oracle_detector, write_coco

    annotations = write_coco(tmp_path / "coco")
    onnx_path = oracle_detector(tmp_path / "o.onnx")
    image = str(tmp_path / "coco" / "coins.png")
    argv = ["--model_name", "o", "--model_def", str(onnx_path), "--mlir", str(tmp_path / "o.mlir")]
    argv += ["--pixel_format", "gray", "--scale", repr(SCALE), "--test_input", image]
    assert model_transform.run(argv) == 0
    table = str(tmp_path / "o_cali")
    assert (
        run_calibration.run(
            [str(tmp_path / "o.mlir"), "--dataset", str(tmp_path / "coco"), "-o", table]
        )
        == 0
    )
    argv = ["--mlir", str(tmp_path / "o.mlir"), "--quantize", "INT8", "--chip", "bm1684x"]
    argv += [
        "--calibration_table",
        table,
        "--test_input",
        image,
        "--model",
        str(tmp_path / "o.bmodel"),
    ]
    assert model_deploy.run(argv) == 0
    tpu = tmp_path / "o_bm1684x_int8_sym_tpu.mlir"
    stages = ",".join(str(p) for p in (onnx_path, tmp_path / "o.mlir", tpu, tmp_path / "o.bmodel"))
    argv = ["--stages", stages, "--dataset", str(tmp_path / "coco"), "--dataset_type", "coco"]
    argv += ["--label_file", str(annotations), "--postprocess_type", "coco_mAP", "--no_progress"]
    code, out, err = run_main(model_eval.main, argv, capsys)
    assert code == 0, err
    assert "Average Precision  (AP) @[ IoU=0.50:0.95" in out  # pycocotools' own table
    rows = stage_rows(out)
    assert rows["o.onnx"][0] == rows["o.mlir"][0] == 1.0
    assert rows[tpu.name] == rows["o.bmodel"]
    assert 0.5 < rows["o.bmodel"][0] <= 1.0


def test_nms_keeps_the_best_of_overlapping_boxes():
    from tpuc.tools.eval_post import class_nms, nms

    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10]], float)
    scores = np.array([0.5, 0.9, 0.7, 0.4])
    assert nms(boxes, scores, 0.5).tolist() == [1, 2]  # IoU(0,1) = 81/119 > 0.5
    classes = np.array([0, 0, 0, 1])  # another class is never suppressed
    assert sorted(class_nms(boxes, scores, classes, 0.5).tolist()) == [1, 2, 3]


def test_boxes_map_back_through_letterbox():
    from tpuc.ir.preprocess import Preprocess
    from tpuc.tools.eval_post import to_image

    pp = Preprocess(keep_aspect_ratio=True, pad_type="center")
    # a 200x100 (h x w) image letterboxed into 64x64: scale 0.32, 32 wide, 16 px left pad
    net = np.array([[16.0, 0.0, 48.0, 64.0]])
    assert to_image(net, (200, 100), (64, 64), pp).tolist() == [[0.0, 0.0, 100.0, 200.0]]


def test_yolov5_head_decodes_one_anchor():
    """One confident cell of the stride-8 head, anchor 1 (16x30): centre
    (2*0.5-0.5+gx)*8, size (2*0.5)^2*anchor for a logit of 0 (sigmoid 0.5)."""
    from tpuc.tools.eval_post import yolov5

    classes, net = 2, (64, 64)
    heads = [np.full((3 * (5 + classes), 64 // s, 64 // s), -20.0) for s in (8, 16, 32)]
    cell = heads[0].reshape(3, 5 + classes, 8, 8)[1, :, 2, 5]  # anchor 1, gy 2, gx 5 (a view)
    cell[:4] = 0.0  # xy, wh logits -> sigmoid 0.5
    cell[4] = 20.0  # objectness ~1
    cell[5 + 1] = 20.0  # class 1
    boxes, scores, found = yolov5(heads[::-1], 0.5, net)  # head order does not matter
    assert found.tolist() == [1] and scores[0] > 0.99
    cx, cy, w, h = (0.5 + 5) * 8, (0.5 + 2) * 8, 16, 30
    np.testing.assert_allclose(boxes[0], [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])


def test_tflite_stage_scores_like_its_top_module(digits, tmp_path, capsys):
    """The digits classifier as a .tflite FULLY_CONNECTED on NHWC images:
    LiteRT and the TOP module model_transform.py made of it score alike."""
    import onnx
    from onnx import numpy_helper

    from tests.support.tflite_builder import one_op

    work, _, _ = digits
    init = {i.name: numpy_helper.to_array(i) for i in onnx.load(work / "d.onnx").graph.initializer}
    consts = [init["W"].astype(np.float32), init["B"].astype(np.float32)]
    blob = one_op("FULLY_CONNECTED", [BATCH, 8, 8, 1], [BATCH, 10], consts)
    (tmp_path / "d.tflite").write_bytes(blob)
    argv = ["--model_name", "t", "--model_def", str(tmp_path / "d.tflite"), "--mlir"]
    argv += [str(tmp_path / "t.mlir"), "--pixel_format", "gray", "--channel_format", "nhwc"]
    assert model_transform.run(argv + ["--scale", repr(SCALE)]) == 0
    stages = f"{tmp_path / 'd.tflite'},{tmp_path / 't.mlir'}"
    argv = ["--stages", stages, "--dataset", str(work / "data"), "--postprocess_type", "topx"]
    code, out, err = run_main(model_eval.main, argv + ["--count", "100", "--no_progress"], capsys)
    assert code == 0, err
    rows = stage_rows(out)
    assert rows["d.tflite"] == rows["t.mlir"]
    assert rows["d.tflite"][1] > 0.8


def test_db_head_boxes_a_text_region():
    """A 20x6 region of probability 0.9: one box grown by 20*6*1.5/52 px on
    every side, scored 0.9; specks thinner than 3 px are dropped."""
    from tpuc.tools.eval_post import db_text

    prob = np.zeros((1, 1, 32, 48), np.float32)
    prob[0, 0, 10:16, 5:25] = 0.9
    prob[0, 0, 25:27, 30:40] = 0.9  # 2 px tall: not text
    boxes, scores, classes = db_text([prob[0]], 0.1, (32, 48))
    grow = 20 * 6 * 1.5 / 52
    np.testing.assert_allclose(boxes, [[5 - grow, 10 - grow, 25 + grow, 16 + grow]])
    np.testing.assert_allclose(scores, [0.9], rtol=1e-6)
    assert classes.tolist() == [0]


def test_page_text_set_has_line_boxes(tmp_path):
    """skimage's page as a COCO text set: every box inside its image, lines
    wider than tall, the page's lines split between its halves."""
    from tests.support.page_text import write_coco

    data = json.loads(write_coco(tmp_path).read_text())
    assert [i["file_name"] for i in data["images"]] == [
        "page.png",
        "page_left.png",
        "page_right.png",
    ]
    sizes = {i["id"]: (i["width"], i["height"]) for i in data["images"]}
    per_image = {i: 0 for i in sizes}
    for a in data["annotations"]:
        x, y, w, h = a["bbox"]
        width, height = sizes[a["image_id"]]
        assert x >= 0 and x + w <= width and y >= 0 and y + h <= height
        per_image[a["image_id"]] += 1
    assert 8 <= per_image[1] <= 12  # the page has 8 text lines and a code line
    assert per_image[2] >= 6 and per_image[3] >= 6
