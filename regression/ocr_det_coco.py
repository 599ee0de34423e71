"""PP-OCR det (the anchor set's ppocr_det, RapidOCR's PP-OCRv4 detector) on a
real COCO-format text set: skimage's `page` (tests/support/page_text.py),
scored by model_eval.py's `db` head and pycocotools at every stage.

    python regression/ocr_det_coco.py OUT_DIR [--anchors DIR]

Writes OUT_DIR/coco (3 images, 24 text-line boxes), transforms, calibrates
(the anchor's 20 calibration samples) and deploys INT8 for bm1684x, then
prints model_eval.py's table for ONNX, TOP, INT8 TPU module and bmodel.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from regression.model_zoo import ANCHORS, anchor_model  # noqa: E402
from tests.support.page_text import write_coco  # noqa: E402
from tpuc.tools import model_deploy, model_eval, model_transform, run_calibration  # noqa: E402

SCALE = ",".join([repr(1 / 127.5)] * 3)  # RapidOCR: (x/255 - 0.5) / 0.5, BGR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    args = parser.parse_args()
    out = args.out
    zoo = anchor_model("ppocr_det", args.anchors)
    annotations = write_coco(out / "coco")
    mlir = str(out / "det.mlir")
    argv = ["--model_name", "det", "--model_def", str(zoo.onnx_path), "--mlir", mlir]
    argv += [
        "--input_shapes",
        str(zoo.input_shapes).replace(" ", ""),
        "--mean",
        "127.5,127.5,127.5",
    ]
    argv += [
        "--scale",
        SCALE,
        "--pixel_format",
        "bgr",
        "--test_input",
        str(out / "coco" / "page.png"),
    ]
    assert model_transform.run(argv) == 0
    table = str(out / "det_cali")
    cali = str(zoo.onnx_path.parent / "cali")
    assert run_calibration.run([mlir, "--dataset", cali, "-o", table]) == 0
    argv = ["--mlir", mlir, "--quantize", "INT8", "--chip", "bm1684x", "--calibration_table", table]
    assert model_deploy.run(argv + ["--model", str(out / "det.bmodel")]) == 0
    tpu = out / "det_bm1684x_int8_sym_tpu.mlir"
    stages = ",".join(str(p) for p in (zoo.onnx_path, mlir, tpu, out / "det.bmodel"))
    argv = ["--stages", stages, "--dataset", str(out / "coco"), "--dataset_type", "coco"]
    argv += ["--label_file", str(annotations), "--postprocess_type", "coco_mAP"]
    model_eval.main(argv + ["--detection_head", "db", "--no_progress"])


if __name__ == "__main__":
    main()
