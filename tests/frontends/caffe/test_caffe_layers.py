"""The Caffe per-layer suite in CI: every case of regression/caffe_layers.py
(every layer type the frontend converts, Pooling in ceil mode where floor
and ceil differ, legacy inputs, a V1 network) converted by tpuc and compared
tensor by tensor with OpenCV's Caffe importer, then deployed."""

from __future__ import annotations

import numpy as np
import pytest
from caffe_layers import CASES, MIN_COSINE, NetBuilder, build_case, deploy_case, run_case

from tpuc.frontends.caffe import convert_caffe
from tpuc.interp.top_interpreter import run_top
from tpuc.ir.weights import WeightStore, attach_weights


@pytest.mark.parametrize("name", list(CASES))
def test_layer_matches_opencv(name, tmp_path):
    result = run_case(name, tmp_path)
    assert result.compared > 0
    assert result.worst >= MIN_COSINE, f"{result.worst_tensor}: cos {result.worst}"


@pytest.mark.parametrize("name", list(CASES))
def test_layer_deploys_bit_exact(name, tmp_path):
    """INT8/F16/BF16 on bm1684x and INT8 on cv183x: TPU interpreter vs TOP
    within tolerance, bmodel vs TPU interpreter bit for bit, engine
    commands only."""
    outcome = deploy_case(name, tmp_path)
    assert all(why == "ok" for why in outcome.values()), outcome


def run_tpuc(builder: NetBuilder, folder) -> dict[str, np.ndarray]:
    prototxt, caffemodel = builder.write(folder)
    module, weights, _ = convert_caffe(str(prototxt), str(caffemodel), builder.name)
    store = WeightStore(weights)
    attach_weights(module, store)
    return run_top(module, store, builder.feed(), dump_all=True)


def test_lrn_k_against_caffe_formula(tmp_path):
    """OpenCV ignores LRN's `k`; Caffe's x / (k + alpha/n sum x^2)^beta, by hand."""
    b = NetBuilder("lrn_k")
    b.input("data", [1, 6, 3, 3])
    b.add("norm", "LRN", ["data"], lrn_param={"local_size": 3, "alpha": 0.5, "k": 2.0})
    x = b.feed()["data"].astype(np.float64)
    sq = np.pad(x**2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    want = x / (2.0 + 0.5 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** 0.75
    got = run_tpuc(b, tmp_path)["norm"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_slice_without_points_splits_equally(tmp_path):
    """OpenCV cannot run this form; the split is checked against numpy."""
    b = NetBuilder("slice_equal")
    b.input("data", [1, 6, 2, 2])
    b.add("slice", "Slice", ["data"], tops=["a", "b", "c"])
    x = b.feed()["data"]
    got = run_tpuc(b, tmp_path)
    for i, name in enumerate("abc"):
        np.testing.assert_array_equal(got[name], x[:, 2 * i : 2 * i + 2])


def test_upsample_is_nearest(tmp_path):
    b = NetBuilder("upsample")
    b.input("data", [1, 2, 3, 4])
    b.add("up", "Upsample", ["data"], upsample_param={"scale": 2})
    x = b.feed()["data"]
    got = run_tpuc(b, tmp_path)["up"]
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))


def test_in_place_values_get_unique_names(tmp_path):
    """conv -> bn -> scale -> relu all write 'conv': the last writer keeps
    the blob name, earlier ones are conv/1, conv/2, conv/3."""
    prototxt, caffemodel, _ = build_case("batchnorm_scale_inplace", tmp_path)
    _, _, tensors = convert_caffe(str(prototxt), str(caffemodel), "bn")
    assert tensors["conv"] == ["conv/1"]
    assert tensors["bn"] == ["conv/2"]
    assert tensors["scale"] == ["conv/3"]
    assert tensors["relu"] == ["conv"]
    assert tensors["drop"] == ["conv"]  # Dropout is the identity


def test_batchnorm_divides_by_the_factor(tmp_path):
    """mean/s and var/s reach the TOP op (s = 999.98 here)."""
    prototxt, caffemodel, _ = build_case("batchnorm_scale_inplace", tmp_path)
    module, weights, _ = convert_caffe(str(prototxt), str(caffemodel), "bn")
    b = NetBuilder("batchnorm_scale_inplace")
    CASES["batchnorm_scale_inplace"](b)
    mean = next(blobs for entry, blobs in b.layers if entry["name"] == "bn")[0]
    np.testing.assert_allclose(weights["bn_mean"], mean / np.float32(999.98), rtol=1e-6)
