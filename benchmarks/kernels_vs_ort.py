"""Time the TOP float Conv kernel on every convolution shape of ResNet-50
(batch 1, 224x224) against onnxruntime running a one-node Conv model.

Run from the repo root: `python benchmarks/kernels_vs_ort.py [--threads 2]`.
Prints one line per configuration (weighted by how often ResNet-50 uses it)
and the total ratio kernel/ORT; both sides use the same thread count.
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

    from tpuc.interp.kernels import KERNELS
    from tpuc.dialects import top

    sess, w, b = ort_conv(in_c, out_c, k, stride, hw, group, threads)
    x = np.random.default_rng(1).standard_normal((1, in_c, hw, hw)).astype(np.float32)
    op = top_conv(k, stride, group)
    fn = KERNELS[top.ConvOp]
    ours = fn(op, [x, w, b])
    ref = sess.run(None, {"x": x})[0]
    err = float(np.abs(ours - ref).max() / (np.abs(ref).max() + 1e-12))
    time.sleep(0.05)  # let ORT's spinning worker threads go idle
    t_top = best_time(lambda: fn(op, [x, w, b]), repeat)
    time.sleep(0.05)  # and OpenBLAS's
    t_ort = best_time(lambda: sess.run(None, {"x": x}), repeat)
    name = f"{count}x conv {in_c:4d}->{out_c:4d} k{k} s{stride} {hw:3d}x{hw:<3d} g{group}"
    print(
        f"{name}  ort {t_ort * 1e3:7.2f} ms  top {t_top * 1e3:7.2f} ms  "
        f"ratio {t_top / t_ort:5.2f}  relerr {err:.1e}",
        flush=True,
    )
    return count * t_ort, count * t_top


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--extra", action="store_true", help="also depthwise/grouped shapes")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
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
