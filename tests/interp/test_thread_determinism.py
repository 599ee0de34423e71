"""Float results do not depend on the kernel thread count (issue 16, item
6): the TOP interpreter, the TPU interpreter and the simulator give the same
bytes on 1, 2 and 4 threads, set directly or through $TPUC_THREADS, on a
residual CNN whose convs are big enough to be cut into shards."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from resblock import SHAPE, resblock_model
from tiny_cnn import transform_and_calibrate

from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.interp.tpu_interpreter import TpuInterpreter
from tpuc.ir.module_io import load_module
from tpuc.kernels import executor
from tpuc.kernels.executor import Executor
from tpuc.target.runtime import load_bmodel
from tpuc.tools import model_deploy

THREADS = (1, 2, 4)


@pytest.fixture(scope="module")
def resblock(tmp_path_factory):
    work = tmp_path_factory.mktemp("resblock")
    resblock_model(work / "rb.onnx")
    return transform_and_calibrate(work, "rb", SHAPE, seed=3, samples=2)


def digest(outputs: dict[str, np.ndarray]) -> str:
    """One hash over every tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for name in sorted(outputs):
        a = np.ascontiguousarray(outputs[name])
        h.update(f"{name}:{a.dtype}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def test_shards_depend_on_the_work_only():
    """The same work is cut into the same shards whatever the threads."""
    cuts = set()
    for threads in THREADS:
        rt = Executor(threads=threads)
        with rt.active():
            cuts.add(tuple(rt.shards(w, 64) for w in (1, 1 << 20, 5 << 20, 1 << 30)))
    assert cuts == {(1, 1, 5, executor.MAX_SHARDS)}


def test_top_interpreter_bytes_do_not_depend_on_threads(resblock, monkeypatch):
    module, store = load_module(resblock / "rb.mlir")
    x = dict(np.load(resblock / "in.npz"))
    digests = {}
    for threads in THREADS:
        interp = TopInterpreter(module, threads=threads)
        digests[threads] = digest(interp.run(store, x, dump_all=True))
    for threads in THREADS:  # tpuc's own setting, read when none is given
        monkeypatch.setenv(executor.THREADS_ENV, str(threads))
        digests[f"env{threads}"] = digest(TopInterpreter(module).run(store, x, dump_all=True))
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_tpu_interpreter_and_simulator_bytes_do_not_depend_on_threads(resblock, mode, tmp_path):
    argv = ["--mlir", str(resblock / "rb.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--calibration_table", str(resblock / "rb_cali_table")] if mode == "INT8" else []
    argv += [
        "--test_input",
        str(resblock / "rb_in_f32.npz"),
        "--model",
        str(tmp_path / "rb.bmodel"),
    ]
    assert model_deploy.run(argv) == 0
    module, store = load_module(next(tmp_path.glob("rb_*_tpu.mlir")))
    x = dict(np.load(resblock / "in.npz"))
    interpreted, simulated = set(), set()
    for threads in THREADS:
        interpreted.add(
            digest(TpuInterpreter(module, threads=threads).run(store, x, dump_all=True))
        )
        program = load_bmodel(tmp_path / "rb.bmodel", threads=threads)
        simulated.add(digest(program.run(x)))
    assert len(interpreted) == 1
    assert len(simulated) == 1
