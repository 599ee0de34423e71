"""Bias correction (`run_calibration.py --bc`): remove the mean output error
that rounding a layer's weights to INT8 causes (Nagel et al., arXiv
1906.04721, empirical form).

Rounding W to W_q shifts the layer's output by (W_q − W)·x, and over real
inputs that shift has a non-zero mean per output channel (ReLU inputs are
all positive, so rounding errors of one sign add up). The mean,
E[W_q·x_q − W·x] per channel, is measured on the calibration samples and
subtracted from the layer's bias (a layer without a bias gets one). W_q is
the weight as INT8 lowering quantizes it (per output channel); x is the float input the layer
sees, and x_q that input fake-quantized at its calibration threshold when
thresholds are given (the input the INT8 layer really reads, clipping
included), x itself otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpuc.base.numerics import fake_quant
from tpuc.interp.top_interpreter import Step, TopInterpreter, activation_name
from tpuc.ir.weights import WeightStore
from tpuc.workflow.calibration.linear import Linear, linears


@dataclass
class Correction:
    """One layer's measured mean error per output channel."""

    layer: Linear
    quantized: np.ndarray  # W_q
    total: np.ndarray  # summed per-channel means over samples
    samples: int = 0

    @property
    def mean_error(self) -> np.ndarray:
        return self.total / max(self.samples, 1)


class ErrorMeter:
    """Measures E[W_q·x_q − W·x] per channel through the interpreter's hook."""

    def __init__(self, layers: Sequence[Linear], thresholds: Mapping[str, float]):
        self.thresholds = thresholds
        self.by_op = {
            layer.op: Correction(layer, layer.quantized_weight(), 0.0)
            for layer in layers
            if layer.has_bias_slot
        }

    def observe(self, step: Step, args: list, results: list) -> None:
        found = self.by_op.get(step.op)
        if found is None:
            return
        x = args[0]
        threshold = self.thresholds.get(activation_name(step.operands[0]) or "")
        x_q = x if threshold is None else fake_quant(x, threshold)
        layer = found.layer
        error = layer.linear(x_q, found.quantized) - layer.linear(x, layer.weight)
        found.total = found.total + found.layer.channel_mean(error)
        found.samples += 1


def correct_biases(
    interp: TopInterpreter,
    store: WeightStore,
    samples: Sequence[Any],
    load: Callable[[Any], dict[str, np.ndarray]],
    progress: Callable[[Iterable, str], Iterable],
    thresholds: Mapping[str, float] | None = None,
) -> list[Correction]:
    """Subtract each layer's mean INT8 error from its bias (in place in
    `store`; a layer without a bias gets one); the corrections made.
    `thresholds`: the calibration thresholds of the layers' inputs."""
    meter = ErrorMeter(linears((s.op for s in interp.steps), store), thresholds or {})
    for sample in progress(samples, "bias correction"):
        interp.run(store, load(sample), observe=meter.observe)
    done = []
    for found in meter.by_op.values():
        if not found.samples:
            continue
        bias = found.layer.bias
        base = np.zeros(found.layer.out_channels) if bias is None else bias
        found.layer.set_bias(np.asarray(base, np.float64) - found.mean_error)
        done.append(found)
    return done
