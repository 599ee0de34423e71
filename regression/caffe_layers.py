"""The Caffe per-layer suite: one small Caffe model per layer type and
variant (seeded weights, written with tpuc's own caffe.proto classes), each
converted by tpuc's Caffe frontend, run in the TOP interpreter and compared
tensor by tensor with OpenCV's Caffe importer.

    python regression/caffe_layers.py [--cases conv_group,pool_ave_ceil] [--keep DIR] [--deploy]

prints one line per case; with --deploy each case also goes through
run_calibration and model_deploy (INT8/F16/BF16 bm1684x, INT8 cv183x, each
bit-exact bmodel vs TPU interpreter). tests/frontends/caffe/test_caffe_layers.py
runs every case both ways in CI. Cases cover every layer type the frontend converts,
Pooling in ceil mode on sizes where floor and ceil differ, the legacy
`input:` forms and a V1-format (`layers { type: CONVOLUTION }`) network.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SEED = 0
MIN_COSINE = 0.99999


@dataclass
class NetBuilder:
    """Builds a prototxt and a caffemodel with tpuc's caffe.proto classes.
    `v1`: write legacy `layers { type: ENUM }` entries."""

    name: str
    v1: bool = False
    seed: int = SEED
    layers: list[tuple[dict[str, Any], list[np.ndarray]]] = field(default_factory=list)
    inputs: dict[str, list[int]] = field(default_factory=dict)
    legacy: str = ""  # "", "input_dim" or "input_shape": legacy input forms

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def input(self, name: str, shape: list[int]) -> str:
        self.inputs[name] = shape
        return name

    def add(self, name: str, type_: str, bottoms, tops=None, blobs=(), **params) -> str:
        tops = [name] if tops is None else list(tops)
        entry = {"name": name, "type": type_, "bottom": list(bottoms), "top": tops, **params}
        self.layers.append((entry, [np.asarray(b, np.float32) for b in blobs]))
        return tops[0]

    def randn(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def write(self, folder: Path) -> tuple[Path, Path]:
        from google.protobuf import json_format, text_format

        from tpuc.frontends.caffe.model import V1_TYPES, messages

        net, weights = messages()["NetParameter"](), messages()["NetWeights"]()
        net.name = weights.name = self.name
        self._write_inputs(net)
        v1_enum = {v: k for k, v in V1_TYPES.items()}
        for entry, blobs in self.layers:
            entry = dict(entry)
            if self.v1:
                entry["type"] = v1_enum[entry["type"]]
            target = net.layers.add() if self.v1 else net.layer.add()
            json_format.ParseDict(entry, target)
            stored = weights.layers.add() if self.v1 else weights.layer.add()
            for key in ("name", "type", "bottom", "top"):
                json_format.ParseDict({key: entry[key]}, stored, ignore_unknown_fields=False)
            for blob in blobs:
                proto = stored.blobs.add()
                proto.shape.dim.extend(blob.shape)
                proto.data.extend(blob.reshape(-1).tolist())
        prototxt, caffemodel = folder / f"{self.name}.prototxt", folder / f"{self.name}.caffemodel"
        prototxt.write_text(text_format.MessageToString(net))
        caffemodel.write_bytes(weights.SerializeToString())
        return prototxt, caffemodel

    def _write_inputs(self, net) -> None:
        if self.legacy:
            for name, shape in self.inputs.items():
                net.input.append(name)
                if self.legacy == "input_dim":
                    net.input_dim.extend(shape)
                else:
                    net.input_shape.add().dim.extend(shape)
            return
        for name, shape in self.inputs.items():
            layer = net.layers.add() if self.v1 else net.layer.add()
            if self.v1:  # V1 has no Input layer: legacy inputs instead
                net.layers.pop()
                net.input.append(name)
                net.input_shape.add().dim.extend(shape)
                continue
            layer.name, layer.type = name, "Input"
            layer.top.append(name)
            layer.input_param.shape.add().dim.extend(shape)

    def feed(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(self.seed + 1)
        return {n: rng.standard_normal(s).astype(np.float32) for n, s in self.inputs.items()}


# --- the cases ------------------------------------------------------------------------

CASES: dict[str, Callable[[NetBuilder], None]] = {}


def case(fn: Callable[[NetBuilder], None]) -> Callable[[NetBuilder], None]:
    CASES[fn.__name__.removeprefix("case_")] = fn
    return fn


def _conv(b: NetBuilder, name, bottom, cin, cout, k, group=1, bias=True, **conv) -> str:
    kh, kw = (k, k) if isinstance(k, int) else k
    blobs = [b.randn(cout, cin // group, kh, kw, scale=0.3)] + ([b.randn(cout)] if bias else [])
    size = {"kernel_size": [k]} if isinstance(k, int) else {"kernel_h": kh, "kernel_w": kw}
    param = {"num_output": cout, "group": group, "bias_term": bias, **size, **conv}
    return b.add(name, "Convolution", [bottom], blobs=blobs, convolution_param=param)


@case
def case_conv_group_dilation(b: NetBuilder) -> None:
    x = b.input("data", [1, 4, 11, 11])
    _conv(b, "conv", x, 4, 6, 3, group=2, pad=[2], stride=[2], dilation=[2])


@case
def case_conv_rect_nobias(b: NetBuilder) -> None:
    x = b.input("data", [1, 3, 9, 12])
    _conv(b, "conv", x, 3, 5, (3, 5), bias=False, pad_h=1, pad_w=2, stride_h=1, stride_w=2)


@case
def case_deconv(b: NetBuilder) -> None:
    x = b.input("data", [1, 4, 5, 6])
    blobs = [b.randn(4, 3, 4, 4, scale=0.3), b.randn(6)]
    param = {"num_output": 6, "group": 2, "kernel_size": [4], "stride": [2], "pad": [1]}
    b.add("deconv", "Deconvolution", [x], blobs=blobs, convolution_param=param)


def _pool(b: NetBuilder, pool: str, size: int, k: int, s: int, p: int) -> None:
    x = b.input("data", [1, 3, size, size])
    param = {"pool": pool, "kernel_size": k, "stride": s, "pad": p}
    b.add("pool", "Pooling", [x], pooling_param=param)


@case
def case_pool_max_ceil(b: NetBuilder) -> None:
    _pool(b, "MAX", 8, 3, 2, 0)  # floor 3, ceil 4


@case
def case_pool_ave_ceil(b: NetBuilder) -> None:
    _pool(b, "AVE", 8, 3, 2, 0)  # floor 3, ceil 4: the last window is clipped


@case
def case_pool_ave_ceil_pad(b: NetBuilder) -> None:
    _pool(b, "AVE", 8, 3, 2, 1)  # floor 4, ceil 5: divisor clipped to [-1, 9)


@case
def case_pool_max_ceil_pad_clip(b: NetBuilder) -> None:
    _pool(b, "MAX", 7, 2, 2, 1)  # ceil 5, the clipping rule drops the last: 4


@case
def case_pool_global(b: NetBuilder) -> None:
    x = b.input("data", [1, 5, 7, 6])
    b.add("gap", "Pooling", [x], pooling_param={"pool": "AVE", "global_pooling": True})
    b.add("gmp", "Pooling", [x], pooling_param={"pool": "MAX", "global_pooling": True})


@case
def case_inner_product(b: NetBuilder) -> None:
    x = b.input("data", [2, 3, 4, 5])
    b.add("fc", "InnerProduct", [x], blobs=[b.randn(7, 60, scale=0.2), b.randn(7)],
          inner_product_param={"num_output": 7})  # fmt: skip
    b.add("fc_axis2", "InnerProduct", [x], blobs=[b.randn(6, 20, scale=0.2)],
          inner_product_param={"num_output": 6, "axis": 2, "bias_term": False})  # fmt: skip


@case
def case_eltwise(b: NetBuilder) -> None:
    b.inputs.update({"a": [1, 4, 5, 5], "b": [1, 4, 5, 5], "c": [1, 4, 5, 5]})
    b.add("sum", "Eltwise", ["a", "b"], eltwise_param={"operation": "SUM"})
    b.add("sum_coeff", "Eltwise", ["a", "b", "c"],
          eltwise_param={"operation": "SUM", "coeff": [0.5, -1.0, 2.0]})  # fmt: skip
    b.add("prod", "Eltwise", ["a", "b"], eltwise_param={"operation": "PROD"})
    b.add("max", "Eltwise", ["a", "b", "c"], eltwise_param={"operation": "MAX"})


@case
def case_concat_slice(b: NetBuilder) -> None:
    b.inputs.update({"a": [1, 2, 4, 5], "b": [1, 3, 4, 5]})
    b.add("cat", "Concat", ["a", "b"])
    b.add("cat_h", "Concat", ["a", "a"], concat_param={"axis": 2})
    b.add("slice", "Slice", ["cat"], tops=["s0", "s1", "s2"], slice_param={"slice_point": [1, 4]})
    b.add(
        "halves", "Slice", ["cat_h"], tops=["h0", "h1"], slice_param={"axis": 2, "slice_point": [3]}
    )


@case
def case_reshape_flatten_permute(b: NetBuilder) -> None:
    x = b.input("data", [2, 3, 4, 6])
    b.add("reshape", "Reshape", [x], reshape_param={"shape": {"dim": [0, -1, 8]}})
    b.add("reshape_axis", "Reshape", [x],
          reshape_param={"shape": {"dim": [2, 2]}, "axis": 2, "num_axes": 1})  # fmt: skip
    b.add("flatten", "Flatten", [x])
    b.add("flatten_mid", "Flatten", [x], flatten_param={"axis": 1, "end_axis": 2})
    b.add("permute", "Permute", [x], permute_param={"order": [0, 2, 3, 1]})


@case
def case_softmax(b: NetBuilder) -> None:
    x = b.input("data", [2, 5, 3, 4])
    b.add("prob", "Softmax", [x])
    b.add("prob_w", "Softmax", [x], softmax_param={"axis": 3})


@case
def case_batchnorm_scale_inplace(b: NetBuilder) -> None:
    """conv -> BatchNorm (factor 999.98) -> Scale -> ReLU, all in place."""
    x = b.input("data", [1, 3, 8, 8])
    y = _conv(b, "conv", x, 3, 4, 3, pad=[1])
    mean, var = b.randn(4) * 999.98, np.abs(b.randn(4)) * 999.98 + 0.5
    b.add("bn", "BatchNorm", [y], tops=[y], blobs=[mean, var, [999.98]],
          batch_norm_param={"use_global_stats": True})  # fmt: skip
    b.add("scale", "Scale", [y], tops=[y], blobs=[b.randn(4), b.randn(4)],
          scale_param={"bias_term": True})  # fmt: skip
    b.add("relu", "ReLU", [y], tops=[y])
    b.add("drop", "Dropout", [y], tops=[y], dropout_param={"dropout_ratio": 0.3})
    b.add("pool", "Pooling", [y], pooling_param={"pool": "MAX", "kernel_size": 2, "stride": 2})


@case
def case_scale_two_bottoms(b: NetBuilder) -> None:
    b.inputs.update({"x": [1, 4, 3, 3], "s": [1, 4, 3, 3]})
    b.add("mul", "Scale", ["x", "s"], scale_param={"axis": 0})


@case
def case_lrn(b: NetBuilder) -> None:
    x = b.input("data", [1, 7, 5, 5])
    # k stays 1: OpenCV 4.x reads LRN's bias from a field named `bias` and
    # ignores Caffe's `k` (tests/frontends/caffe checks k != 1 against numpy)
    b.add("norm", "LRN", [x], lrn_param={"local_size": 5, "alpha": 0.1, "beta": 0.75})


@case
def case_activations(b: NetBuilder) -> None:
    x = b.input("data", [1, 4, 5, 5])
    b.add("relu", "ReLU", [x])
    b.add("leaky", "ReLU", [x], relu_param={"negative_slope": 0.1})
    b.add("prelu", "PReLU", [x], blobs=[b.randn(4, scale=0.3)])
    b.add("prelu_shared", "PReLU", [x], blobs=[[0.2]], prelu_param={"channel_shared": True})
    b.add("sigmoid", "Sigmoid", [x])
    b.add("tanh", "TanH", [x])
    b.add("split", "Split", [x], tops=["x1", "x2"])
    b.add("drop", "Dropout", ["x1"], tops=["dropped"])
    b.add("sum", "Eltwise", ["dropped", "x2"])


@case
def case_fork_layers(b: NetBuilder) -> None:
    x = b.input("data", [1, 6, 4, 5])
    b.add("relu6", "ReLU6", [x])
    b.add("shuffle", "ShuffleChannel", [x], shuffle_channel_param={"group": 3})
    b.add("interp_zoom", "Interp", [x], interp_param={"zoom_factor": 3})
    b.add("interp_size", "Interp", [x], interp_param={"height": 7, "width": 3})


@case
def case_legacy_input_dim(b: NetBuilder) -> None:
    b.legacy = "input_dim"
    x = b.input("data", [1, 3, 6, 6])
    _conv(b, "conv", x, 3, 4, 3)


@case
def case_legacy_input_shape(b: NetBuilder) -> None:
    b.legacy = "input_shape"
    x = b.input("data", [1, 3, 6, 6])
    b.add("pool", "Pooling", [x], pooling_param={"pool": "AVE", "kernel_size": 3, "stride": 2})


@case
def case_v1_format(b: NetBuilder) -> None:
    """V1 `layers` with enum types, legacy inputs."""
    b.v1 = True
    x = b.input("data", [1, 3, 10, 10])
    y = _conv(b, "conv1", x, 3, 4, 3, stride=[1])
    b.add("relu1", "ReLU", [y], tops=[y])
    b.add("pool1", "Pooling", [y], pooling_param={"pool": "MAX", "kernel_size": 3, "stride": 2})
    b.add("norm1", "LRN", ["pool1"], lrn_param={"local_size": 3, "alpha": 0.01})
    b.add("fc", "InnerProduct", ["norm1"], blobs=[b.randn(5, 64, scale=0.2), b.randn(5)],
          inner_product_param={"num_output": 5})  # fmt: skip
    b.add("prob", "Softmax", ["fc"])


# --- running ------------------------------------------------------------------------


@dataclass
class CaseResult:
    name: str
    compared: int
    worst: float
    worst_tensor: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.compared > 0 and self.worst >= MIN_COSINE


def build_case(name: str, folder: Path) -> tuple[Path, Path, dict[str, np.ndarray]]:
    builder = NetBuilder(name)
    CASES[name](builder)
    prototxt, caffemodel = builder.write(folder)
    return prototxt, caffemodel, builder.feed()


def run_case(name: str, folder: Path) -> CaseResult:
    """Convert, run TOP (before canonicalization, so every layer's output
    exists) and compare every tensor OpenCV also exposes."""
    from tpuc.frontends.caffe import convert_caffe
    from tpuc.frontends.caffe.reference import run_caffe
    from tpuc.interp.top_interpreter import run_top
    from tpuc.ir.weights import WeightStore, attach_weights

    start = time.perf_counter()
    prototxt, caffemodel, feed = build_case(name, folder)
    module, weights, layer_tensors = convert_caffe(str(prototxt), str(caffemodel), name)
    store = WeightStore(weights)
    attach_weights(module, store)
    got = run_top(module, store, feed, dump_all=True)
    keys = {layer: names[0] for layer, names in layer_tensors.items()}
    ref = run_caffe(str(prototxt), str(caffemodel), feed, keys)
    worst, worst_name, compared = 1.0, "", 0
    for key, want in ref.items():
        have = got.get(key)
        cos = _cosine(have, want) if have is not None else -1.0
        compared += 1
        if cos < worst:
            worst, worst_name = cos, key
    return CaseResult(name, compared, worst, worst_name, time.perf_counter() - start)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return -1.0
    x, y = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        return 1.0 if nx == ny else 0.0
    return float(x @ y / (nx * ny))


DEPLOY_TARGETS = ("bm1684x:INT8", "bm1684x:F16", "bm1684x:BF16", "cv183x:INT8")
CALIBRATION_SAMPLES = 3


def deploy_case(name: str, folder: Path, targets=DEPLOY_TARGETS) -> dict[str, str]:
    """model_transform (OpenCV check), run_calibration on seeded samples and
    model_deploy per target ("ok", or why not): deploy checks the TPU
    interpreter against TOP and the bmodel against the interpreter bit for
    bit; "ok" also needs every bmodel step to be an engine command or copy."""
    import contextlib
    import io

    from tpuc.base.errors import TpucError
    from tpuc.tools import model_deploy, model_transform, run_calibration

    work = folder / name
    work.mkdir(parents=True, exist_ok=True)
    prototxt, caffemodel, feed = build_case(name, work)
    np.savez(work / "in.npz", **feed)
    cali = work / "cali"
    cali.mkdir(exist_ok=True)
    rng = np.random.default_rng(SEED + 2)
    for i in range(CALIBRATION_SAMPLES):
        sample = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in feed.items()}
        np.savez(cali / f"{i}.npz", **sample)
    mlir, table = work / f"{name}.mlir", work / "cali_table"
    transform = ["--model_name", name, "--model_def", str(prototxt),
                 "--model_data", str(caffemodel), "--test_input", str(work / "in.npz"),
                 "--mlir", str(mlir)]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        model_transform.run(transform)
        run_calibration.run([str(mlir), "--dataset", str(cali), "-o", str(table)])
    outcome = {}
    for target in targets:
        chip, mode = target.split(":")
        bmodel = work / f"{chip}_{mode.lower()}" / f"{name}.bmodel"
        bmodel.parent.mkdir(exist_ok=True)
        argv = ["--mlir", str(mlir), "--chip", chip, "--quantize", mode,
                "--calibration_table", str(table), "--test_input", str(work / f"{name}_in_f32.npz"),
                "--test_reference", str(work / f"{name}_top_outputs.npz"),
                "--tolerance", "0.9,0.5", "--model", str(bmodel)]  # fmt: skip
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                model_deploy.run(argv)
            outcome[target] = _engine_only(bmodel)
        except TpucError as exc:
            outcome[target] = str(exc)
    return outcome


def _engine_only(bmodel: Path) -> str:
    from tpuc.target.runtime import load_bmodel
    from tpuc.target.runtime.engine import CopyStep, EngineStep

    program = load_bmodel(bmodel)
    steps = [step for _, subnet in program.subnets for step in subnet]
    other = [step.what for step in steps if not isinstance(step, EngineStep | CopyStep)]
    return "ok" if not other else f"not engine commands: {', '.join(map(str, other[:3]))}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--keep", help="write the models into this folder and keep them")
    parser.add_argument(
        "--deploy",
        action="store_true",
        help=f"also deploy each case to {', '.join(DEPLOY_TARGETS)}",
    )
    args = parser.parse_args(argv)
    names = args.cases.split(",") if args.cases else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            r = run_case(name, folder)
            deployed = deploy_case(name, folder) if args.deploy else {}
            bad = {t: why for t, why in deployed.items() if why != "ok"}
            failed += not r.passed or bool(bad)
            verdict = "ok" if r.passed and not bad else "FAIL"
            print(f"{name:32} {r.compared:3} tensors  min cos {r.worst:.8f} "
                  f"({r.worst_tensor})  {r.seconds:5.2f}s  {verdict}")  # fmt: skip
            if deployed:
                print(f"    deploy: {len(deployed) - len(bad)}/{len(deployed)} ok; {bad or ''}")
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
