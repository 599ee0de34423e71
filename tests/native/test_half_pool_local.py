"""F16/BF16 average pools the global rule runs in f32 between casts
(pool.half_via_f32), as local ops of a layer group (local/half_pool.py:
cast in, f32 pooling, cast out per slice, as TPU-MLIR groups its own
Cast, Pool2D, Cast): a 1x1 conv, ReLU and the pool in one group, against
tpuc's interpreter in the vendor runtime, and cheaper than every op
global (measured 2026-11-27: 2x2 over 64x28x28 F16 25,509 -> 6,218 cycles;
squeezenet's 1000x13x13 global pool 109,157 -> 100,536)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

POOLS = {
    "2x2 stride 2": (64, 28, dict(kernel_shape=[2, 2], strides=[2, 2])),
    "3x3 stride 2": (96, 14, dict(kernel_shape=[3, 3], strides=[2, 2])),
}


def conv_relu_pool(rng, c, side, pool):
    w = (rng.standard_normal((c, c, 1, 1)) * 0.05).astype("f4")
    last = (node("AveragePool", ["r"], ["y"], **pool) if pool
            else node("GlobalAveragePool", ["r"], ["y"]))  # fmt: skip
    nodes = [node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]), node("Relu", ["r0"], ["r"]),
             last]  # fmt: skip
    return nodes, {"a": rng.standard_normal((1, c, side, side)).astype("f4")}, [("w", w)]


def grouped_and_global(tmp_path, mode, nodes, feeds, inits):
    for sub in ("g", "a"):
        (tmp_path / sub).mkdir()
    run, grouped = native_run_and_cycles(tmp_path / "g", nodes, feeds, ["y"], mode, inits)
    _, alone = native_run_and_cycles(tmp_path / "a", nodes, feeds, ["y"], mode, inits,
                                     all_global=True)  # fmt: skip
    return run, grouped, alone


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("case", list(POOLS))
def test_half_average_pool_in_a_group_bit_exact(tmp_path, mode, case):
    c, side, pool = POOLS[case]
    nodes, feeds, inits = conv_relu_pool(np.random.default_rng(0), c, side, pool)
    run, grouped, alone = grouped_and_global(tmp_path, mode, nodes, feeds, inits)
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
    assert grouped < alone / 2


def test_squeezenet_global_pool_in_a_group(tmp_path, monkeypatch):
    """The 13x13 global pool over 1000 channels: the f32 pool's order is not
    the interpreter's (1 of 1000 values one f16 step off, as the global
    rule's lanes view): within one step, cheaper than global. The f32
    pooling runs with is_global_pooling (two short steps instead of one
    long one: squeezenet F16 150,111 -> 147,855 vendor cycles) and its
    work rows lie in the op's scratch, after the two f32 copies."""
    scratch = _record_pool_scratch(monkeypatch)
    nodes, feeds, inits = conv_relu_pool(np.random.default_rng(0), 1000, 13, None)
    run, grouped, alone = grouped_and_global(tmp_path, "F16", nodes, feeds, inits)
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.all(np.abs(chip - tpuc) <= np.abs(tpuc) * 2.0**-10)
    need = -(-1000 // 64) * 64
    assert scratch and all(own < at and at + need <= own + size for at, own, size in scratch)
    assert grouped < alone


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize(("c", "side"), [(64, 8), (96, 5), (130, 4)])
def test_half_global_pool_on_the_chips_sums_in_a_group(tmp_path, monkeypatch, mode, c, side):
    """A global average the global rule leaves to the chip's half-float
    kernel (a plane of at most 32 elements or a power of two: resblock's
    8x8) pools locally with is_global_pooling over the whole plane: the
    same sums, bit for bit, and cheaper than every op global (resblock F16
    10,423 -> 9,018 vendor cycles, TPU-MLIR 9,575)."""
    import tpuc.tools.deploy_native as deploy_native

    compiled = []
    codegen = deploy_native.native_codegen

    def keep(*args, **kwargs):
        compiled.append(codegen(*args, **kwargs))
        return compiled[-1]

    monkeypatch.setattr(deploy_native, "native_codegen", keep)
    scratch = _record_pool_scratch(monkeypatch)
    nodes, feeds, inits = conv_relu_pool(np.random.default_rng(1), c, side, None)
    run, grouped, alone = grouped_and_global(tmp_path, mode, nodes, feeds, inits)
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
    pools = [op for op in compiled[0].module.walk() if op.name == "tpu.Pool2D"]
    assert [op.parent_op().name for op in pools] == ["tpu.Group"]
    # the kernel's work rows (one EU row per channel plane) inside the op's scratch
    need = -(-c // 64) * 64
    assert scratch and all(own <= at and at + need <= own + size for at, own, size in scratch)
    assert grouped < alone


def _record_pool_scratch(monkeypatch) -> list[tuple[int, int, int]]:
    """(buffer_addr of each local pooling call, its op's scratch address and size)."""
    from tpuc.passes.native.local import pool_wide
    from tpuc.passes.native.local.ops import LocalRule
    from tpuc.target.vendor.params import PoolingLocal

    seen: list[tuple[int, int, int]] = []
    rule = pool_wide.POOLING

    def command(op, ctx, plan, step):
        found = rule.command(op, ctx, plan, step)
        lop = plan.local(op)
        for call in found:
            if call[2] == "backend_api_pooling_local":
                at = PoolingLocal.from_buffer_copy(call[3]).buffer_addr
                seen.append((at, lop.buffer_addr, lop.buffer_size))
        return found

    patched = LocalRule(rule.backward, rule.coeffs, rule.buffer, command, rule.splits_h)
    monkeypatch.setattr(pool_wide, "POOLING", patched)
    return seen
