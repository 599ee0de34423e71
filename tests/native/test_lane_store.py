"""A pooled [1, C, 1, 1] vector that a layer group stores for a global fc is
stored lane by lane (passes/native/local/lane_store.py): 64 runs of a
lane's planes instead of C one-byte runs, the fc's weight rows in the same
order. Bit for bit against tpuc's TPU interpreter in the vendor runtime,
and cheaper than the channel-order store."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node, tensor

from tpuc.passes.native.local import chain, lane_store


def test_lane_order_is_each_lanes_planes_in_a_run():
    order = lane_store.lane_order(200)  # lanes 0-7 hold 4 channels, 8-63 hold 3
    assert sorted(order) == list(range(200))
    assert list(order[[0, 64, 128, 192]]) == [0, 1, 2, 3]  # lane 0's planes
    assert list(order[[8, 72, 136]]) == [32, 33, 34]  # lane 8 after 8 lanes of 4
    assert order[63] == 32 + 55 * 3
    assert list(lane_store.lane_order(128)[[0, 64, 1, 65]]) == [0, 1, 2, 3]


def _run(tmp, channels: int, classes: int):
    tmp.mkdir(exist_ok=True)
    rng = np.random.default_rng(channels + classes)
    x = rng.uniform(-1, 1, (1, 16, 7, 7)).astype(np.float32)
    inits = [
        tensor("w1", rng.standard_normal((channels, 16, 1, 1)).astype(np.float32) * 0.3),
        tensor("b1", rng.standard_normal(channels).astype(np.float32) * 0.1),
        tensor("w2", rng.standard_normal((channels, classes)).astype(np.float32) * 0.1),
        tensor("b2", rng.standard_normal(classes).astype(np.float32) * 0.1),
    ]
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c"]),
        node("Relu", ["c"], ["r"]),
        node("GlobalAveragePool", ["r"], ["p"]),
        node("Flatten", ["p"], ["f"]),
        node("Gemm", ["f", "w2", "b2"], ["g"]),
        node("Softmax", ["g"], ["y"], axis=1),  # the fc's result in f32 (float epilogue)
    ]
    return native_run_and_cycles(tmp, nodes, {"x": x}, ["y"], "INT8", inits=inits)


@pytest.mark.parametrize("channels, classes", [(200, 10), (200, 2), (544, 30), (128, 10)])
def test_lane_store_is_the_interpreters(tmp_path, vendor, channels, classes):
    run, _ = _run(tmp_path, channels, classes)
    run.assert_bit_equal()


def test_lane_store_is_cheaper(tmp_path, vendor, monkeypatch):
    _, lanes = _run(tmp_path / "lanes", 544, 30)
    monkeypatch.setattr(chain, "mark_lane_major", lambda plan: None)
    _, channels = _run(tmp_path / "channels", 544, 30)
    # 7,350 against 8,908 since the one-value-per-channel store is a GDMA matrix move
    # (10,091 as a tensor move): packing the lanes still saves its runs
    assert lanes < 0.9 * channels, (lanes, channels)
