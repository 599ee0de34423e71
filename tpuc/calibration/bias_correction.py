"""Bias correction (`run_calibration.py --bc`): remove the mean output error
that rounding a layer's weights to INT8 causes (Nagel et al., arXiv
1906.04721, empirical form).

Rounding W to W_q shifts the layer's output by (W_q − W)·x, and over real
inputs that shift has a non-zero mean per output channel (ReLU inputs are
all positive, so rounding errors of one sign add up). The mean,
E[(W_q − W)·x] per channel, is measured on the calibration samples with the
float inputs each layer sees, and subtracted from the layer's bias (a layer
without a bias gets one). W_q is the weight as INT8 lowering quantizes it:
per output channel for convolutions, per tensor for matmuls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpuc.calibration.linear import Linear, linears
from tpuc.dialects.traits import WeightAxes
from tpuc.interp.top_interpreter import Step, TopInterpreter
from tpuc.numerics import fake_quant_per_channel
from tpuc.weights import WeightStore


def quantized_weight(layer: Linear) -> np.ndarray:
    """The layer's weight as INT8 lowering rounds it, back in float."""
    axes = layer.op.get_trait(WeightAxes)
    axis = axes.axes.get(1) if axes is not None else None
    return fake_quant_per_channel(layer.weight, axis)


@dataclass
class Correction:
    """One layer's measured mean error per output channel."""

    layer: Linear
    delta: np.ndarray  # W_q − W
    total: np.ndarray  # summed per-channel means over samples
    samples: int = 0

    @property
    def mean_error(self) -> np.ndarray:
        return self.total / max(self.samples, 1)


class ErrorMeter:
    """Measures E[(W_q − W)·x] per channel through the interpreter's hook."""

    def __init__(self, layers: Sequence[Linear]):
        self.by_op = {
            layer.op: Correction(layer, quantized_weight(layer) - layer.weight, 0.0)
            for layer in layers
            if layer.has_bias_slot
        }

    def observe(self, step: Step, args: list, results: list) -> None:
        found = self.by_op.get(step.op)
        if found is None:
            return
        error = found.layer.linear(args[0], found.delta)
        found.total = found.total + found.layer.channel_mean(error)
        found.samples += 1


def correct_biases(
    interp: TopInterpreter,
    store: WeightStore,
    samples: Sequence[Any],
    load: Callable[[Any], dict[str, np.ndarray]],
    progress: Callable[[Iterable, str], Iterable],
) -> list[Correction]:
    """Subtract each layer's mean INT8 weight error from its bias (in place
    in `store`; a layer without a bias gets one); the corrections made."""
    meter = ErrorMeter(linears((s.op for s in interp.steps), store))
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
