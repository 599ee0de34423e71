"""No .mlir text makes a tool hang or print a traceback (issue 16, item 2):
seeded mutations of the tiny CNN's TOP and TPU modules through the
loaders, tpuc-opt and model_runner (and a few through model_deploy) end
with exit 0 or one `error:` line, each well within the time limit. Long
campaigns: regression/fuzz_mlir.py."""

from __future__ import annotations

import random
import time

import pytest
from fuzz_mlir import mutate, run_tool, tool_argv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpuc.base.errors import TpucError
from tpuc.ir.module_io import load_module
from tpuc.tools import model_deploy

LIMIT_SECONDS = 5.0


@pytest.fixture(scope="module")
def modules(prepared, tmp_path_factory):  # noqa: F811
    """{"top": cnn.mlir, "tpu": its INT8 TPU module} (with their weights)."""
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--model", str(prepared / "cnn_int8.bmodel")]
    assert model_deploy.run(argv) == 0
    return {"top": prepared / "cnn.mlir", "tpu": next(prepared.glob("cnn_*int8*_tpu.mlir"))}


def mutated(modules, which: str, rng: random.Random):
    source = modules[which]
    path = source.with_name(f"fuzz_{which}.mlir")  # beside it: the weight file resolves
    path.write_bytes(mutate(source.read_bytes(), rng))
    return path


@pytest.mark.parametrize("which", ["top", "tpu"])
@pytest.mark.parametrize("tool", ["opt", "runner"])
def test_seeded_mutations_through_tools(modules, prepared, which, tool):
    outcomes = set()
    for index in range(100):
        rng = random.Random(f"{which}:{tool}:{index}")
        path = mutated(modules, which, rng)
        main, argv = tool_argv(tool, path, prepared, rng)
        start = time.perf_counter()
        outcome, detail = run_tool(main, argv)
        assert time.perf_counter() - start < LIMIT_SECONDS, f"case {index}"
        assert outcome in ("ok", "error"), f"case {index}: {detail}"
        outcomes.add(outcome)
    assert "error" in outcomes


def test_a_few_mutations_through_model_deploy(modules, prepared):
    for index in range(12):
        rng = random.Random(f"deploy:{index}")
        path = mutated(modules, "top", rng)
        main, argv = tool_argv("deploy", path, prepared, rng)
        outcome, detail = run_tool(main, argv)
        assert outcome in ("ok", "error"), f"case {index}: {detail}"


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    edits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(list(b'"%{}<>:=x0\xff'))),
        min_size=1,
        max_size=3,
    )
)
def test_loader_edits_load_or_fail_with_one_line(modules, edits):
    """load_module (every tool's loader) on hypothesis' character edits."""
    data = bytearray(modules["top"].read_bytes())
    for where, char in edits:
        data[int(where * len(data))] = char
    path = modules["top"].with_name("fuzz_loader.mlir")
    path.write_bytes(bytes(data))
    start = time.perf_counter()
    try:
        load_module(path)
    except TpucError as exc:
        assert "\n" not in str(exc)
    assert time.perf_counter() - start < LIMIT_SECONDS


@pytest.mark.parametrize(
    "old,new",
    [  # what regression/fuzz_mlir.py found
        ("pads = [1 : i64, 1 : i64,", "pads = [1 : i64, 4294967297 : i64,"),  # past a u32 field
        ('module.name = "cnn"', 'module.name = "c\\00n"'),  # a NUL in the output names
    ],
)
def test_found_cases_through_model_deploy(modules, prepared, old, new):
    text = modules["top"].read_text()
    assert old in text
    path = modules["top"].with_name("fuzz_found.mlir")
    path.write_text(text.replace(old, new, 1))
    main, argv = tool_argv("deploy", path, prepared, random.Random(1))
    outcome, detail = run_tool(main, argv)
    assert outcome == "error", detail
