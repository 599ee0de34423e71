"""model_eval.py: the accuracy of one stage of a model on a dataset.

    model_eval.py --model_file m.onnx|m.tflite|m.mlir|m_tpu.mlir|m.bmodel
                  --dataset DIR [--dataset_type imagenet|coco|user_define]
                  --postprocess_type topx|coco_mAP [--label_file F] [--count N]
    model_eval.py --stages m.onnx,m.mlir,m_bm1684x_int8_sym_tpu.mlir,m.bmodel ...

Every stage of one model is fed identical tensors: the preprocessing is the
one model_transform.py recorded on the module's inputs (for an .onnx or
.tflite stage, and for a bmodel, the first module among --stages or --mlir
supplies it; else the preprocessing flags). Images are grouped by the
model's batch; the last batch is padded by repeating its last image, and
the padding is not scored. `--count` defaults to the whole dataset.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import existing_file, make_parser

PROG = "model_eval.py"
MODEL_SUFFIXES = (".onnx", ".tflite", ".mlir", ".bmodel")


def build_parser():
    from tpuc.ir.preprocess import add_preprocess_args
    from tpuc.tools.eval_post import DECODERS

    parser = make_parser(
        PROG,
        "Accuracy of a model (.onnx, .tflite, TOP or TPU .mlir, .bmodel) on a dataset: "
        "top-1/top-5 of a classifier, or COCO mAP (pycocotools) of a detector.",
        "Preprocessing comes from the module (what model_transform.py recorded); an .onnx, "
        ".tflite or .bmodel takes it from --mlir or the first .mlir of --stages, else from the "
        "preprocessing flags. --stages runs several stages of one model on identical inputs "
        "and prints one table.",
    )
    parser.add_argument("--model_file", help="the model to evaluate")
    parser.add_argument(
        "--stages",
        help="comma-separated models (e.g. m.onnx,m.mlir,m_int8_tpu.mlir,m.bmodel) evaluated "
        "in turn on identical inputs; prints a table",
    )
    parser.add_argument(
        "--mlir", help="module whose recorded preprocessing and input shapes apply to the others"
    )
    parser.add_argument("--dataset", help="image folder (ImageFolder tree for imagenet)")
    parser.add_argument(
        "--dataset_type",
        choices=("imagenet", "coco", "user_define"),
        default="imagenet",
        help="imagenet/user_define: labelled images; coco: COCO-format detection set "
        "(default imagenet)",
    )
    parser.add_argument(
        "--postprocess_type",
        choices=("topx", "coco_mAP"),
        required=True,
        help="topx: top-1/top-5 of the first output; coco_mAP: pycocotools bbox AP",
    )
    parser.add_argument(
        "--label_file",
        help="classification: `name label` lines or one label per line in image order; "
        "coco: the COCO annotation json",
    )
    parser.add_argument("--data_list", help="file listing the images, one per line")
    parser.add_argument("--count", type=int, default=0, help="images to evaluate (default 0 = all)")
    parser.add_argument("--input_shapes", help=".onnx/.tflite: input shapes, e.g. [[1,3,224,224]]")
    parser.add_argument(
        "--detection_head",
        choices=sorted(DECODERS),
        default="boxes",
        help="coco_mAP: how the outputs encode boxes (default boxes: boxes[K,4] x1y1x2y2 in "
        "input pixels + scores[K,C], or + scores[K] + classes[K])",
    )
    parser.add_argument("--nms_threshold", type=float, default=0.6, help="NMS IoU (default 0.6)")
    parser.add_argument(
        "--score_threshold", type=float, default=0.01, help="lowest kept score (default 0.01)"
    )
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")
    add_preprocess_args(parser)
    return parser


# --- models ----------------------------------------------------------------------


@dataclass
class Model:
    """A loaded model: its inputs and a function from a feed to outputs in order."""

    path: str
    specs: list
    call: object

    def __call__(self, feed) -> list:
        return list(self.call(feed).values())


def _module_model(path: str) -> Model:
    from tpuc.base.module_state import ModuleState, state_of
    from tpuc.interp.accelerator import accelerated
    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.ir.preprocess import input_specs

    module, store = load_module(path)
    state = state_of(module)
    if state is None or state in (ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED):
        # prepared once: its sessions serve every sample
        top_interp = TopInterpreter(module, native=accelerated("model_eval"))
        return Model(path, input_specs(module), lambda feed: top_interp.run(store, feed))
    if state != ModuleState.TPU_LOWERED:
        raise TpucError(f"{path}: a {state} module has reordered weights; evaluate its bmodel")
    interpreter = TpuInterpreter(module)
    return Model(
        path,
        input_specs(module),
        lambda feed: interpreter.real_values(interpreter.run(store, feed)),
    )


def _bmodel_model(path: str, reference: list) -> Model:
    from tpuc.ir.preprocess import InputSpec
    from tpuc.target.runtime import load_bmodel
    from tpuc.target.vendor.run import NativeRunner, is_native

    if is_native(path):
        runner = NativeRunner(path)  # one runtime worker for every sample; ends with the process
        known = {s.name: s.preprocess for s in reference}
        specs = [InputSpec(d.name, tuple(d.shape), known.get(d.name)) for d in runner.io.inputs]
        return Model(path, specs, runner.run)

    program = load_bmodel(path)
    known = {s.name: s.preprocess for s in reference}
    specs = [InputSpec(d.name, tuple(d.shape), known.get(d.name)) for d in program.param.inputs]
    return Model(path, specs, program.run)


def _onnx_model(path: str, shapes, reference: list) -> Model:
    import onnxruntime

    from tpuc.ir.preprocess import InputSpec

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    declared = [tuple(i.shape) for i in session.get_inputs()]
    specs = _specs(path, names, declared, shapes, reference, InputSpec)
    outputs = [o.name for o in session.get_outputs()]

    def call(feed):
        try:
            values = session.run(outputs, feed)
        except Exception as exc:  # onnxruntime's own exception types
            reason = str(exc).strip().splitlines()[0]
            raise TpucError(f"{path}: onnxruntime failed: {reason}") from None
        return dict(zip(outputs, values, strict=True))

    return Model(path, specs, call)


def _tflite_model(path: str, shapes, reference: list) -> Model:
    """LiteRT's reference kernels; inputs in the model's own layout (NHWC)."""
    from tpuc.frontends.tflite.reference import _interpreter, run_tflite
    from tpuc.ir.preprocess import InputSpec

    details = _interpreter(path, False).get_input_details()
    names = [d["name"] for d in details]
    declared = [tuple(int(x) for x in d["shape"]) for d in details]
    specs = _specs(path, names, declared, shapes, reference, InputSpec)
    return Model(path, specs, lambda feed: run_tflite(path, feed))


def _specs(path, names, declared, shapes, reference, InputSpec) -> list:
    known = {s.name: s for s in reference}
    if shapes and len(shapes) != len(names):
        raise TpucError(
            f"--input_shapes gives {len(shapes)} shape(s), {path} has {len(names)} input(s)"
        )
    specs = []
    for i, name in enumerate(names):
        shape = shapes[i] if shapes else (known[name].shape if name in known else declared[i])
        if not all(isinstance(d, int) and d > 0 for d in shape):
            raise TpucError(f"{path}: input '{name}' has shape {list(shape)}; give --input_shapes")
        pp = known[name].preprocess if name in known else None
        specs.append(InputSpec(name, tuple(int(d) for d in shape), pp))
    return specs


def load_model(path: str, shapes, reference: list, fallback) -> Model:
    """The model at `path`; inputs without recorded preprocessing get `fallback`."""
    from tpuc.ir.preprocess import with_preprocess

    file = existing_file(path, "--model_file")
    suffix = file.suffix.lower()
    if suffix not in MODEL_SUFFIXES:
        raise TpucError(f"{path}: unsupported model type (supported: {', '.join(MODEL_SUFFIXES)})")
    if suffix == ".mlir":
        model = _module_model(path)
    elif suffix == ".bmodel":
        model = _bmodel_model(path, reference)
    elif suffix == ".onnx":
        model = _onnx_model(path, shapes, reference)
    else:
        model = _tflite_model(path, shapes, reference)
    model.specs = with_preprocess(model.specs, fallback)
    return model


# --- the evaluation loop ---------------------------------------------------------


def batches(samples: list, batch: int):
    """Groups of `batch` samples; the last padded by repeating its last sample.
    Yields (samples to feed, how many of them are real)."""
    for start in range(0, len(samples), batch):
        group = samples[start : start + batch]
        real = len(group)
        yield group + [group[-1]] * (batch - real), real


def feed_of(model: Model, group: list) -> dict:
    import numpy as np

    from tpuc.ir.preprocess import load_image

    if len(model.specs) != 1:
        raise TpucError(
            f"{model.path}: has {len(model.specs)} inputs; model_eval feeds one image input"
        )
    spec = model.specs[0]
    one = replace(spec, shape=(1, *spec.shape[1:]))
    return {spec.name: np.concatenate([load_image(s.path, one) for s in group])}


def evaluate(model: Model, samples: list, scorer, progress: bool) -> dict:
    from tqdm import tqdm

    batch = model.specs[0].shape[0] if model.specs and model.specs[0].shape else 1
    bar = tqdm(total=len(samples), desc=Path(model.path).name, disable=not progress, unit="img")
    for group, real in batches(samples, batch):
        outputs = model(feed_of(model, group))
        scorer.score(outputs, group[:real], model.specs[0])
        bar.update(real)
        bar.set_postfix(scorer.postfix())
    bar.close()
    return scorer.summary()


class ClassifierScorer:
    def __init__(self):
        from tpuc.tools.eval_post import TopK

        self.counts = TopK()

    def score(self, outputs, samples, spec) -> None:
        self.counts.add(outputs[0], [s.target for s in samples])

    def postfix(self) -> dict:
        s = self.counts.summary()
        return {"top1": f"{s['top1']:.3f}", "top5": f"{s['top5']:.3f}"}

    def summary(self) -> dict:
        return self.counts.summary()


class DetectionScorer:
    def __init__(self, annotations: dict, args):
        from tpuc.tools.eval_post import CocoScore

        self.coco = CocoScore(
            annotations, args.detection_head, args.score_threshold, args.nms_threshold
        )
        self.sizes = {i["id"]: i for i in annotations["images"]}

    def score(self, outputs, samples, spec) -> None:
        from tpuc.ir.preprocess import Preprocess, image_layout

        pp = spec.preprocess or Preprocess()
        _, h, w = image_layout(list(spec.shape), pp.channel_format)
        for row, sample in enumerate(samples):
            info = self.sizes[sample.target]
            hw = (info.get("height"), info.get("width"))
            if None in hw:
                from PIL import Image

                with Image.open(sample.path) as image:
                    hw = (image.height, image.width)
            self.coco.add([o[row] for o in outputs], sample.target, hw, (h, w), pp)

    def postfix(self) -> dict:
        return {"boxes": len(self.coco.results)}

    def summary(self) -> dict:
        return self.coco.summary()


def _samples(args):
    from tpuc.tools.eval_data import classification_samples, coco_samples

    if args.dataset_type == "coco":
        if args.postprocess_type != "coco_mAP":
            raise TpucError("--dataset_type coco is scored with --postprocess_type coco_mAP")
        samples, annotations = coco_samples(args.dataset, args.label_file)
        return samples, lambda: DetectionScorer(annotations, args)
    if args.postprocess_type != "topx":
        raise TpucError(
            f"--dataset_type {args.dataset_type} is scored with --postprocess_type topx"
        )
    samples = classification_samples(args.dataset, args.data_list, args.label_file)
    return samples, ClassifierScorer


def run(argv: list[str] | None = None) -> int:
    from tpuc.base.flag_values import parse_shapes
    from tpuc.ir.preprocess import preprocess_from_args

    args = build_parser().parse_args(argv)
    if (args.model_file is None) == (args.stages is None):
        raise TpucError("give exactly one of --model_file and --stages")
    if args.count < 0:
        raise TpucError(f"--count {args.count}: must be 0 (all) or positive")
    paths = [p.strip() for p in (args.stages or args.model_file).split(",") if p.strip()]
    shapes = parse_shapes(args.input_shapes, "--input_shapes") if args.input_shapes else None
    fallback = preprocess_from_args(args)
    samples, make_scorer = _samples(args)
    samples = samples[: args.count] if args.count else samples
    reference = _reference(
        args.mlir or next((p for p in paths if p.lower().endswith(".mlir")), None)
    )
    rows = []
    for path in paths:
        model = load_model(path, shapes, reference, fallback)
        result = evaluate(model, samples, make_scorer(), not args.no_progress)
        rows.append((path, result))
        print(f"{path}: {_line(result)}")
    if len(rows) > 1:
        print(table(rows))
    return 0


def _reference(path: str | None) -> list:
    if path is None:
        return []
    from tpuc.ir.module_io import load_module
    from tpuc.ir.preprocess import input_specs

    module, _ = load_module(existing_file(path, "--mlir"))
    return input_specs(module)


def _line(result: dict) -> str:
    return ", ".join(
        f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()
    )


def table(rows) -> str:
    """One row per stage: the model and its scores."""
    keys = list(rows[0][1])
    width = max(len("model"), *(len(p) for p, _ in rows))
    lines = [f"{'model':<{width}}  " + "  ".join(f"{k:>8}" for k in keys)]
    for path, result in rows:
        cells = [
            f"{result[k]:>8.4f}" if isinstance(result[k], float) else f"{result[k]:>8}"
            for k in keys
        ]
        lines.append(f"{path:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
