"""Time the TOP interpreter on a whole ResNet-50 (random weights, BatchNorm
folded) and the TOP Conv kernel on each of its convolution shapes (batch 1,
224x224), against onnxruntime running the same graph / a one-node Conv model.

Run from the repo root:
    python benchmarks/kernels_vs_ort.py [--threads 2] [--onnx resnet50.onnx] [--no-convs]
        [--workers 2]
Prints the whole-network line (and, with --onnx, the same for a real model
converted by tpuc's frontend), then one line per conv configuration (weighted
by how often ResNet-50 uses it) and the total ratio kernel/ORT. Both sides use
the same thread count; times are the best of --repeat runs.
"""

from __future__ import annotations

import argparse
import os
import time


def resnet50_convs() -> list[tuple[int, int, int, int, int, int]]:
    """(count, in_c, out_c, kernel, stride, in_hw) of each conv shape in
    torchvision's ResNet-50 (stride on the 3x3 conv, v1.5) and the v1 variant's
    strided 1x1 convs."""
    convs = [(1, 3, 64, 7, 2, 224)]
    stages = [
        (64, 256, 3, 56, 1),
        (128, 512, 4, 56, 2),
        (256, 1024, 6, 28, 2),
        (512, 2048, 3, 14, 2),
    ]
    in_c = 64
    for mid, out_c, blocks, hw, stride in stages:
        out_hw = hw // stride
        convs.append((1, in_c, mid, 1, 1, hw))
        convs.append((1, mid, mid, 3, stride, hw))
        convs.append((1, mid, out_c, 1, 1, out_hw))
        convs.append((1, in_c, out_c, 1, stride, hw))
        convs.append((blocks - 1, out_c, mid, 1, 1, out_hw))
        convs.append((blocks - 1, mid, mid, 3, 1, out_hw))
        convs.append((blocks - 1, mid, out_c, 1, 1, out_hw))
        in_c = out_c
    return convs


def extra_convs() -> list[tuple[int, int, int, int, int, int, int]]:
    """(count, in_c, out_c, kernel, stride, in_hw, group): depthwise and grouped
    shapes (MobileNet / ResNeXt style), not part of the ResNet-50 total."""
    return [
        (1, 32, 32, 3, 1, 112, 32),
        (1, 144, 144, 3, 2, 56, 144),
        (1, 576, 576, 3, 1, 14, 576),
        (1, 128, 128, 3, 1, 56, 32),
        (1, 512, 512, 3, 1, 14, 32),
    ]


def ort_conv(in_c, out_c, k, stride, hw, group, threads):
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((out_c, in_c // group, k, k)).astype(np.float32) * 0.05
    b = rng.standard_normal(out_c).astype(np.float32)
    node = helper.make_node(
        "Conv",
        ["x", "w", "b"],
        ["y"],
        kernel_shape=[k, k],
        strides=[stride, stride],
        pads=[k // 2] * 4,
        group=group,
    )
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, in_c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess, w, b


def top_conv(k, stride, group):
    from tpuc.dialects import top
    from tpuc.dialects.base import tensor_type

    operands = [top.WeightOp.make([], n, result_types=[tensor_type([1])]).output for n in "xwb"]
    attrs = {
        "kernel_shape": [k, k],
        "strides": [stride, stride],
        "pads": [k // 2] * 4,
        "dilations": [1, 1],
        "group": group,
    }
    return top.ConvOp.make(operands, "y", attrs)


def interleaved(top_fn, ort_fn, repeat: int) -> tuple[float, float]:
    """Best times of TOP and ORT, measured alternately so that load from
    other processes hits both sides alike. The pauses outlast the busy-wait
    of each side's idle worker threads (OpenBLAS spins ~0.1 s after a call),
    which would otherwise steal a core from the other side."""
    top_fn()
    ort_fn()
    best_top = best_ort = float("inf")
    for _ in range(repeat):
        time.sleep(0.3)
        t0 = time.perf_counter()
        top_fn()
        best_top = min(best_top, time.perf_counter() - t0)
        time.sleep(0.3)
        t0 = time.perf_counter()
        ort_fn()
        best_ort = min(best_ort, time.perf_counter() - t0)
    return best_top, best_ort


def best_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench(count, in_c, out_c, k, stride, hw, group, threads, repeat):
    import numpy as np

    from tpuc.dialects import top
    from tpuc.interp.top_ops import KERNELS
    from tpuc.interp.top_ops.executor import Executor

    sess, w, b = ort_conv(in_c, out_c, k, stride, hw, group, threads)
    x = np.random.default_rng(1).standard_normal((1, in_c, hw, hw)).astype(np.float32)
    op = top_conv(k, stride, group)
    fn = KERNELS[top.ConvOp]
    rt = Executor()  # as in the interpreter: plans, scratch and outputs reused across calls

    def ours_fn():
        with rt.active():
            fn(op, [x, w, b])
            rt.arena.collect()

    with rt.active():
        ours = fn(op, [x, w, b])
    ref = sess.run(None, {"x": x})[0]
    err = float(np.abs(ours - ref).max() / (np.abs(ref).max() + 1e-12))
    del ours
    time.sleep(0.05)  # let ORT's spinning worker threads go idle
    t_top = best_time(ours_fn, repeat)
    time.sleep(0.05)  # and OpenBLAS's
    t_ort = best_time(lambda: sess.run(None, {"x": x}), repeat)
    name = f"{count}x conv {in_c:4d}->{out_c:4d} k{k} s{stride} {hw:3d}x{hw:<3d} g{group}"
    print(
        f"{name}  ort {t_ort * 1e3:7.2f} ms  top {t_top * 1e3:7.2f} ms  "
        f"ratio {t_top / t_ort:5.2f}  relerr {err:.1e}",
        flush=True,
    )
    return count * t_ort, count * t_top


class ResNet50:
    """ResNet-50 (v1.5, BatchNorm folded into conv bias, random weights) built
    twice: as a TOP module for `run_top` and as an ONNX graph for ORT."""

    def __init__(self, seed: int = 0):
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.weights: dict = {}
        self.nodes: list = []
        self.top_ops: list = []
        self.values: dict = {}  # tensor name -> TOP SSA value
        self.count = 0

    def _weight(self, name, array):
        from tpuc.dialects import top
        from tpuc.dialects.base import tensor_type

        self.weights[name] = array
        op = top.WeightOp.make([], name, result_types=[tensor_type(array.shape)])
        self.top_ops.append(op)
        return op.output

    def _emit(self, op, name):
        self.top_ops.append(op)
        self.values[name] = op.results[0]
        return name

    def conv(self, x, in_c, out_c, k, stride, relu=True):
        import numpy as np
        from onnx import helper

        from tpuc.dialects import top

        self.count += 1
        name = f"conv{self.count}"
        w = self.rng.standard_normal((out_c, in_c, k, k)) * np.sqrt(2.0 / (in_c * k * k))
        b = self.rng.standard_normal(out_c) * 0.1
        w, b = w.astype(np.float32), b.astype(np.float32)
        pads = [k // 2] * 4
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=pads, dilations=[1, 1])
        conv_out = f"{name}_conv" if relu else name
        self.nodes.append(
            helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [conv_out], **attrs)
        )
        if relu:
            self.nodes.append(helper.make_node("Relu", [conv_out], [name]))
        operands = [self.values[x], self._weight(f"{name}_w", w), self._weight(f"{name}_b", b)]
        op = top.ConvOp.make(operands, name, dict(attrs, group=1, do_relu=relu))
        return self._emit(op, name)

    def add_relu(self, a, b):
        from onnx import helper

        from tpuc.dialects import top

        self.count += 1
        name = f"add{self.count}"
        self.nodes.append(helper.make_node("Add", [a, b], [f"{name}_sum"]))
        self.nodes.append(helper.make_node("Relu", [f"{name}_sum"], [name]))
        op = top.AddOp.make([self.values[a], self.values[b]], name, dict(do_relu=True))
        return self._emit(op, name)

    def bottleneck(self, x, in_c, mid, out_c, stride):
        y = self.conv(x, in_c, mid, 1, 1)
        y = self.conv(y, mid, mid, 3, stride)
        y = self.conv(y, mid, out_c, 1, 1, relu=False)
        short = (
            self.conv(x, in_c, out_c, 1, stride, relu=False) if stride != 1 or in_c != out_c else x
        )
        return self.add_relu(y, short)

    def build(self):
        """Return (TOP module, weights, ONNX model bytes)."""
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
        from xdsl.dialects import func
        from xdsl.dialects.builtin import ModuleOp
        from xdsl.ir import Block, Region

        from tpuc.dialects import top
        from tpuc.dialects.base import tensor_type

        shape = [1, 3, 224, 224]
        block = Block(arg_types=[tensor_type(shape)])
        inp = top.InputOp.make([block.args[0]], "input")
        self._emit(inp, "input")
        x = self.conv("input", 3, 64, 7, 2)
        pool = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        self.nodes.append(helper.make_node("MaxPool", [x], ["pool1"], **pool))
        x = self._emit(top.MaxPoolOp.make([self.values[x]], "pool1", pool), "pool1")
        in_c = 64
        for mid, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(blocks):
                x = self.bottleneck(x, in_c, mid, mid * 4, stride if i == 0 else 1)
                in_c = mid * 4
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
        self.nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
        gap = dict(kernel_shape=[7, 7], strides=[1, 1], pads=[0, 0, 0, 0])
        self._emit(top.AvgPoolOp.make([self.values[x]], "gap", gap), "gap")
        self._emit(top.FlattenOp.make([self.values["gap"]], "flat", {}), "flat")
        fc_w = (self.rng.standard_normal((1000, 2048)) * 0.02).astype(np.float32)
        fc_b = np.zeros(1000, np.float32)
        self.nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["fc"], transB=1))
        operands = [self.values["flat"], self._weight("fc_w", fc_w), self._weight("fc_b", fc_b)]
        self._emit(top.MatMulOp.make(operands, "fc", dict(right_transpose=True)), "fc")
        for op in self.top_ops:
            block.add_op(op)
        block.add_op(func.ReturnOp(self.values["fc"]))
        fn = func.FuncOp("main", ([tensor_type(shape)], [self.values["fc"].type]), Region(block))
        graph = helper.make_graph(
            self.nodes,
            "resnet50",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("fc", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(v, k) for k, v in self.weights.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        return ModuleOp([fn]), self.weights, model.SerializeToString()


def bench_resnet50(threads: int, repeat: int, workers: int | None = None) -> None:
    import numpy as np
    import onnxruntime as ort

    from tpuc.interp.top_interpreter import TopInterpreter

    module, weights, model = ResNet50().build()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    interp = TopInterpreter(module, threads=workers)
    ours = interp.run(weights, {"input": x})["fc"]
    ref = sess.run(None, {"input": x})[0]
    cos = float(np.dot(ours.ravel(), ref.ravel()) / np.linalg.norm(ours) / np.linalg.norm(ref))
    t_top, t_ort = interleaved(
        lambda: interp.run(weights, {"input": x}), lambda: sess.run(None, {"input": x}), repeat
    )
    print(
        f"resnet50 whole network: ort {t_ort * 1e3:.1f} ms  top {t_top * 1e3:.1f} ms  "
        f"ratio {t_top / t_ort:.2f}  cosine {cos:.7f}"
    )


def bench_onnx_file(path: str, threads: int, repeat: int, workers: int | None = None) -> None:
    """Whole-model timing of a real ONNX file: converted by tpuc's frontend,
    optimized as model_transform does, run by the TOP interpreter vs ORT."""
    import numpy as np
    import onnxruntime as ort

    from tpuc.frontends.onnx import convert_onnx
    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.pipeline import transform

    module, weights = convert_onnx(path, "bench")
    weights = WeightStore(weights)
    attach_weights(module, weights)
    transform(module)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}
    interp = TopInterpreter(module, threads=workers)
    top_inputs = {op.names[0]: feeds[op.names[0]] for op in interp.inputs}
    ours = next(iter(interp.run(weights, top_inputs).values()))
    ref = sess.run(None, feeds)[0]
    cos = float(np.dot(ours.ravel(), ref.ravel()) / np.linalg.norm(ours) / np.linalg.norm(ref))
    t_top, t_ort = interleaved(
        lambda: interp.run(weights, top_inputs), lambda: sess.run(None, feeds), repeat
    )
    print(
        f"{path}: ort {t_ort * 1e3:.1f} ms  top {t_top * 1e3:.1f} ms  "
        f"ratio {t_top / t_ort:.2f}  cosine {cos:.7f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--extra", action="store_true", help="also depthwise/grouped shapes")
    parser.add_argument("--no-convs", action="store_true", help="only the whole-network run")
    parser.add_argument("--onnx", help="also time this ONNX model end to end (needs the frontend)")
    parser.add_argument(
        "--workers",
        type=int,
        help="run the interpreter's kernels on this many of its own threads (BLAS pinned to "
        "one) instead of letting BLAS thread each GEMM",
    )
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    bench_resnet50(args.threads, args.repeat, args.workers)
    if args.onnx:
        bench_onnx_file(args.onnx, args.threads, args.repeat, args.workers)
    if args.no_convs:
        return
    total_ort = total_top = 0.0
    for count, in_c, out_c, k, stride, hw in resnet50_convs():
        t_ort, t_top = bench(count, in_c, out_c, k, stride, hw, 1, args.threads, args.repeat)
        total_ort += t_ort
        total_top += t_top
    print(
        f"resnet50 convs total: ort {total_ort * 1e3:.1f} ms  top {total_top * 1e3:.1f} ms  "
        f"ratio {total_top / total_ort:.2f}"
    )
    if args.extra:
        for count, in_c, out_c, k, stride, hw, group in extra_convs():
            bench(count, in_c, out_c, k, stride, hw, group, args.threads, args.repeat)


if __name__ == "__main__":
    main()
