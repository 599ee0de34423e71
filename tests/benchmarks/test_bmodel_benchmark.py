"""benchmarks/bmodel.py on a tiny CNN built here (CI has no cached models):
the size split adds up to the file, the activation sum matches the tensor
locations, reuse never exceeds 1, and main prints its table."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from tools_helpers import conv_model

from tpuc.target.bmodel import DTYPE_BYTES, read_bmodel
from tpuc.tools import model_transform, run_calibration

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bmodel.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bmodel_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """run_deploy.py's work layout (<work>/tiny/tiny.mlir, _cali_table,
    _in_f32.npz) and an anchor folder (<anchors>/tiny/meta.json, tiny.onnx)."""
    root = tmp_path_factory.mktemp("bench")
    anchors, work = root / "anchors" / "tiny", root / "work" / "tiny"
    anchors.mkdir(parents=True)
    work.mkdir(parents=True)
    onnx_path = conv_model(anchors / "tiny.onnx")
    meta = {"onnx": "tiny.onnx", "input_shape": [1, 3, 8, 8]}
    (anchors / "meta.json").write_text(json.dumps(meta))
    rng = np.random.default_rng(3)
    np.savez(root / "in.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    samples = root / "samples"
    samples.mkdir()
    for i in range(3):
        np.save(samples / f"s{i}.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    mlir = work / "tiny.mlir"
    argv = ["--model_name", "tiny", "--model_def", str(onnx_path)]
    assert (
        model_transform.run(argv + ["--test_input", str(root / "in.npz"), "--mlir", str(mlir)]) == 0
    )
    table = work / "tiny_cali_table"
    assert run_calibration.run([str(mlir), "--dataset", str(samples), "-o", str(table)]) == 0
    return root


def files(bench, layout):
    return bench.cached_files("tiny", layout / "work", layout / "anchors")


@pytest.mark.parametrize("target", ["bm1684x:INT8", "bm1684x:F16", "cv183x:INT8"])
def test_sizes_add_up_and_activations_match_locations(bench, layout, target):
    compiled, lower_s, backend_s = bench.compile_target(
        files(bench, layout), bench.Target.parse(target)
    )
    assert lower_s > 0 and backend_s > 0
    data = compiled.bmodel
    split = bench.size_split(data)
    assert split.total == len(data)
    assert split.coeff + split.commands + split.metadata == len(data)
    assert split.header == 64 and split.flatbuffer > 0 and split.commands > 0
    model = read_bmodel(data, "tiny")
    assert split.coeff == len(model.nets[0].parameters[0].coeff) > 0
    payloads = bench.command_payloads(model)
    assert 0 <= split.padding < 16 * (len(payloads) + 1)  # 16-byte aligned payloads
    # the activation sum, from the tensor_location rows instead of the module
    rows = compiled.locations["tensors"]
    expected = sum(math.prod(r["shape"]) * DTYPE_BYTES[r["dtype"]] for r in rows)
    neuron, activations = bench.activation_memory(compiled.module)
    assert activations == expected
    assert neuron == model.nets[0].parameters[0].ctx_size > 0
    assert neuron <= activations + 64 * len(rows)  # alignment is all reuse may add
    assert 0 < bench.peak_live(compiled.module) <= neuron


def test_measure_times_both_sides_and_reuses_memory(bench, layout):
    row = bench.measure(files(bench, layout), bench.Target.parse("bm1684x:INT8"), 1, 1)
    assert row.sim_s > 0 and row.ort_s > 0 and row.sim_ratio > 0
    assert row.compile_s == row.lower_s + row.backend_s
    # a layer group's DDR tensors (its input and output) cannot share memory:
    # alignment is all the allocator may add over their sum
    assert row.reuse > 0 and row.neuron_size <= row.activations + 64 * 8
    assert 0 < row.peak <= row.neuron_size
    assert row.cli_s is None


def test_main_prints_the_table(bench, layout, capsys):
    argv = ["--models", "tiny", "--targets", "bm1684x:INT8_ASYM,bm1684x:BF16", "--repeat", "1"]
    argv += ["--threads", "1", "--work", str(layout / "work"), "--anchors", str(layout / "anchors")]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index(bench.HEADER)
    table = out[start + 1 :]
    assert [line.split()[:2] for line in table] == [
        ["tiny", "bm1684x:INT8_ASYM"],
        ["tiny", "bm1684x:BF16"],
    ]
    # model target bmodel coeff cmds meta neuron peak acts reuse …
    column = 9
    assert bench.HEADER.split()[2 * column - 2] == "reuse"  # 7 headers before it have units
    for line in table:
        reuse = float(line.split()[column])
        assert 0 < reuse <= 1.1  # a layer group's input and output never share memory


def test_missing_model_files_name_the_fix(bench, layout, tmp_path):
    with pytest.raises(SystemExit, match="run regression/run_deploy.py first"):
        bench.cached_files("tiny", tmp_path, layout / "anchors")
