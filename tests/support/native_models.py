"""Small ONNX models through the native target (the vendor backend and its
chip model) against tpuc's TPU interpreter, for tests/native.

Two routes: `transformed` + `run_both` go through model_transform and
run_calibration (files in a work folder, 3 random calibration samples);
`native_vs_interp` converts in process and calibrates on the feeds
themselves. A plugin (tests/conftest.py): the `vendor` fixture."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

COSINE = 0.99999  # float modes (check)


def locate_vendor():
    """The vendor component (tpuc.target.vendor.fetch.locate): CI fetches it, so
    the native tests fail, never skip, without it."""
    from tpuc.target.vendor.fetch import locate

    return locate()


@pytest.fixture(scope="module")
def vendor():
    """The vendor component's paths (fails without the cache)."""
    return locate_vendor()


def node(op_type: str, inputs, outputs, **attrs) -> onnx.NodeProto:
    return helper.make_node(op_type, inputs, outputs, **attrs)


def tensor(name: str, array) -> onnx.TensorProto:
    """An initializer of the array's own dtype."""
    return numpy_helper.from_array(np.asarray(array), name)


def _infos(specs) -> list[onnx.ValueInfoProto]:
    """FLOAT value infos of a {name: array or shape} mapping or of names,
    (name, shape) pairs and value infos (kept)."""
    if isinstance(specs, str):
        specs = [specs]
    elif isinstance(specs, Mapping):
        specs = specs.items()
    infos = []
    for spec in specs:
        if isinstance(spec, onnx.ValueInfoProto):
            infos.append(spec)
            continue
        name, shape = (spec, None) if isinstance(spec, str) else spec
        shape = getattr(shape, "shape", shape)
        shape = None if shape is None else list(shape)
        infos.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    return infos


def save_onnx(path: Path, nodes, inputs, outputs, inits=(), opset: int = 13) -> str:
    """Write the model (IR version 8); inputs and outputs as `_infos` takes
    them (an output name alone: shape unknown), initializers as tensors or
    (name, array) pairs."""
    initializer = [i if isinstance(i, onnx.TensorProto) else tensor(*i) for i in inits]
    graph = helper.make_graph(nodes, "g", _infos(inputs), _infos(outputs), initializer)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.save(model, str(path))
    return str(path)


def write_samples(work: Path, inputs, gains: Mapping[str, float] | None = None) -> None:
    """work/in.npz and 3 calibration samples in work/samples: standard normal
    values (seed 0) of the (name, shape) inputs, times their gain if any."""
    rng = np.random.default_rng(0)
    gains = gains or {}

    def arrays():
        return {n: rng.standard_normal(s).astype("f4") * gains.get(n, 1.0) for n, s in inputs}

    np.savez(work / "in.npz", **arrays())
    samples = work / "samples"
    samples.mkdir()
    for i in range(3):
        np.savez(samples / f"s{i}.npz", **arrays())


def calibrate(work: Path, name: str) -> tuple[str, str]:
    """model_transform of work/{name}.onnx (test input work/in.npz) and
    run_calibration over work/samples -> (mlir, table)."""
    from tpuc.tools import model_transform, run_calibration

    mlir, table = str(work / f"{name}.mlir"), str(work / f"{name}_cali_table")
    argv = ["--model_name", name, "--model_def", str(work / f"{name}.onnx"), "--mlir", mlir]
    assert model_transform.run([*argv, "--test_input", str(work / "in.npz")]) == 0
    assert run_calibration.run([mlir, "--dataset", str(work / "samples"), "-o", table]) == 0
    return mlir, table


def transformed(work: Path, name: str, nodes, inputs, outputs, inits=(), opset: int = 13,
                gains=None) -> tuple[str, str]:  # fmt: skip
    """save_onnx, write_samples and calibrate: (mlir, table) of the model
    with the (name, shape) inputs."""
    save_onnx(work / f"{name}.onnx", nodes, inputs, outputs, inits, opset)
    write_samples(work, inputs, gains)
    return calibrate(work, name)


def run_both(work: Path, mlir: str, table: str, mode: str, vendor, qtable=None,
             tweak: Callable | None = None, feeds: Callable | None = None):  # fmt: skip
    """(native outputs, TPU interpreter outputs), real values by name, of the
    mlir lowered in `mode` on work/in.npz; `tweak(module)` edits the lowered
    module first, `feeds(module, inputs)` replaces the inputs."""
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.module_io import load_module
    from tpuc.ir.weights import WeightStore
    from tpuc.passes.native.emit import generate_native
    from tpuc.target.vendor.run import run_native
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import finalize

    module, store = load_module(mlir)
    lower(module, "bm1684x", mode, False, table if mode == "INT8" else None, qtable)
    if tweak is not None:
        tweak(module)
    inputs = dict(np.load(work / "in.npz"))
    if feeds is not None:
        inputs = feeds(module, inputs)
    expected = run_tpu(module, store, inputs)
    finalize(module, WeightStore(store), "bm1684x", 2, True)
    bmodel = work / f"{mode}.bmodel"
    bmodel.write_bytes(generate_native(module, vendor, profile=False).bmodel)
    return run_native(bmodel, inputs, vendor), expected


def check(outputs, expected, mode: str) -> None:
    """INT8 bit for bit, float modes with cosine >= COSINE (run_both's outputs)."""
    assert outputs
    for name, got in outputs.items():
        want = np.asarray(expected[name], np.float32)
        got = np.asarray(got, np.float32).reshape(want.shape)
        if mode == "INT8":
            assert np.array_equal(got, want), f"{name}: {np.count_nonzero(got != want)} differ"
        else:
            a, b = got.ravel().astype(np.float64), want.ravel().astype(np.float64)
            cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
            assert cosine >= COSINE, f"{name}: cosine {cosine:.8f}"


def cali_table(tmp: Path, module, store, feeds) -> Path:
    """A max calibration table of the module on the feeds (one sample)."""
    from tpuc.workflow.calibration.calibrate import one_sample_table

    return one_sample_table(tmp, module, store, feeds, "test")


class Run(NamedTuple):
    got: dict  # native outputs
    expected: dict  # TPU interpreter outputs
    kinds: set[str]  # TPU op names
    bound: float | None  # model_deploy's cosine bound (check_kind); None: bit for bit

    def assert_bit_equal(self) -> None:
        """Every native output equals the TPU interpreter's, bit for bit."""
        for name, want in self.expected.items():
            want = np.asarray(want, np.float32)
            got = np.asarray(self.got[name], np.float32).reshape(want.shape)
            assert np.array_equal(got, want), f"{name}: {np.count_nonzero(got != want)} differ"


def native_vs_interp(tmp: Path, nodes, feeds: dict, outputs, mode: str, inits=(),
                     opset: int = 14, asymmetric: bool = False,
                     tweak: Callable | None = None) -> Run:  # fmt: skip
    """The model (tmp/m.onnx, its inputs the feeds) converted, calibrated on
    the feeds (INT8), lowered (then `tweak(module)`), run by the TPU
    interpreter and natively."""
    return native_run_and_cycles(tmp, nodes, feeds, outputs, mode, inits, opset, asymmetric,
                                 tweak=tweak)[0]  # fmt: skip


def native_run_and_cycles(tmp: Path, nodes, feeds: dict, outputs, mode: str, inits=(),
                          opset: int = 14, asymmetric: bool = False, all_global: bool = False,
                          tweak: Callable | None = None, qtable: Path | None = None,
                          ) -> tuple[Run, int]:  # fmt: skip
    """native_vs_interp's Run and the vendor library's cycles for the whole
    native net (`all_global`: every op a global layer, no layer groups;
    `qtable`: a quantize table for lowering)."""
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.tools.deploy_native import check_kind, native_codegen, run_native_check
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import run_passes, transform_passes

    paths = locate_vendor()
    path = save_onnx(tmp / "m.onnx", nodes, feeds, outputs, inits, opset)
    module, weights = convert_onnx(path, "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    table = cali_table(tmp, module, store, feeds) if mode == "INT8" else None
    lower(module, "bm1684x", mode, asymmetric=asymmetric, cali_table=table, qtable=qtable)
    if tweak is not None:
        tweak(module)
    kinds = {op.name for op in next(iter(module.ops)).body.block.ops}
    expected = run_tpu(module, store, feeds)
    compiled = native_codegen(module, store, "bm1684x", paths, disable_layer_group=all_global)
    got = run_native_check(compiled.bmodel, feeds, paths)
    return Run(got, expected, kinds, check_kind(mode, False, module)[0]), compiled.cycles


def within(got: dict, expected: dict, bound: float | None) -> None:
    """native_differences finds nothing: bit for bit when `bound` is None,
    else that cosine."""
    from tpuc.tools.deploy_native import native_differences

    assert not native_differences(got, expected, bound)


def matches(got: dict, expected: dict, mode: str) -> None:
    """within: INT8 bit for bit, float modes model_deploy's FLOAT_COSINE."""
    from tpuc.tools.deploy_native import FLOAT_COSINE

    within(got, expected, None if mode == "INT8" else FLOAT_COSINE)


def one_weighted_op_bit_exact(tmp: Path, op_type: str, kind: str, mode: str, x, w, b,
                              **attrs) -> None:  # fmt: skip
    """The one-op model `op_type(a, w, b)` natively and in the TPU interpreter:
    the TPU op `kind` is there and every output value is equal."""
    nodes = [node(op_type, ["a", "w", "b"], ["y"], **attrs)]
    got, expected, kinds, _ = native_vs_interp(
        tmp, nodes, {"a": x}, ["y"], mode, inits=[("w", w), ("b", b)]
    )
    assert kind in kinds
    chip, tpuc = np.asarray(got["y"]), np.asarray(expected["y"]).reshape(np.shape(got["y"]))
    same = np.count_nonzero(chip == tpuc)
    assert same == chip.size, f"{same} of {chip.size} equal"
