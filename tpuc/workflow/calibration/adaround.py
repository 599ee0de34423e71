"""Learned rounding of weights (`run_calibration.py --adaround`), AdaRound
style (Nagel et al., arXiv 2004.10568).

Rounding each weight to its nearest INT8 step is not what keeps a layer's
output closest: the errors of a row add up through the inputs. AdaRound
chooses, per weight, floor or ceil of w/s to minimize ‖(W_q − W)·x‖² over
the calibration inputs. With x the layer's input patches (im2col for a
convolution), that error is, for output row o, d_oᵀ·G·d_o with d_o = W_q,o −
W_o and G = Σ x·xᵀ (per group): the samples are read once to build G, and
the optimization runs on G alone. The rounding is relaxed to a rectified
sigmoid h(V) and pushed to 0/1 by an annealed regularizer, as in the
paper. The scale of each row stays the one INT8 lowering will pick (the
row's abs-max element is not moved), so the weights written are exactly
the chosen INT8 values times that scale: lowering reproduces them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tpuc.interp.top_interpreter import Step, TopInterpreter
from tpuc.ir.weights import WeightStore
from tpuc.workflow.calibration.linear import Linear, linears

ZETA, GAMMA = 1.1, -0.1  # rectified sigmoid stretch
ITERATIONS = 400
LEARNING_RATE = 0.01
REG_WEIGHT = 0.01
BETA = (20.0, 2.0)  # regularizer exponent, annealed
WARMUP = 0.2  # share of iterations without the regularizer
MAX_PATCH = 1024  # layers with longer patches (K) keep nearest rounding (cost ~ K²)


def patches(layer: Linear, x: np.ndarray) -> np.ndarray:
    """The layer's input as rows of the matrix its weight multiplies, per
    group: [positions, groups, K]."""
    x = np.asarray(x, np.float32)
    if not layer.is_conv:
        return x.reshape(-1, 1, x.shape[-1])
    w = layer.weight
    kernel = w.shape[2:]
    op = layer.op
    strides = op.value("strides") or [1] * len(kernel)
    dilations = op.value("dilations") or [1] * len(kernel)
    pads = op.value("pads") or [0] * (2 * len(kernel))
    n = len(kernel)
    padded = np.pad(x, [(0, 0), (0, 0), *zip(pads[:n], pads[n:], strict=True)])
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    win = sliding_window_view(padded, span, axis=tuple(range(2, 2 + n)))
    index = (slice(None), slice(None))
    index += tuple(slice(None, None, s) for s in strides)
    index += tuple(slice(None, None, d) for d in dilations)
    win = win[index]  # [N, C, *out, *kernel]
    win = np.moveaxis(win, 1, 1 + n)  # [N, *out, C, *kernel]
    positions = int(np.prod([win.shape[0], *[win.shape[a] for a in range(1, 1 + n)]]))
    return win.reshape(positions, layer.group, -1)


@dataclass
class GramMeter:
    """Σ x·xᵀ of each layer's input patches, per group."""

    layers: dict

    def observe(self, step: Step, args: list, results: list) -> None:
        entry = self.layers.get(step.op)
        if entry is None:
            return
        layer, grams = entry
        rows = patches(layer, args[0]).astype(np.float64)
        grams += np.einsum("pgk,pgl->gkl", rows, rows, optimize=True)


def _h(v: np.ndarray) -> np.ndarray:
    return np.clip(1.0 / (1.0 + np.exp(-v)) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def learn_rows(w: np.ndarray, scale: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """INT8 values for rows `w` [(groups,) rows, K] with steps `scale`
    [(groups,) rows] that minimize Σ_o d_oᵀ·G·d_o, G = `gram` [(groups,) K,
    K] (Adam on the relaxed rounding; all groups at once)."""
    single = w.ndim == 2
    if single:
        w, scale, gram = w[None], scale[None], gram[None]
    w = w.astype(np.float64)
    s = scale[..., None]
    base = np.floor(w / s)
    rest = w / s - base
    fixed = np.abs(w) >= np.abs(w).max(axis=-1, keepdims=True)  # keeps the row's scale
    p = np.clip((rest - GAMMA) / (ZETA - GAMMA), 1e-4, 1 - 1e-4)
    v = np.log(p / (1 - p))  # h(v) = rest: start at the float weight
    diag = np.einsum("gkk->g", gram) / gram.shape[-1]
    norm = np.maximum(diag, 1e-12)[:, None, None]
    m, u = np.zeros_like(v), np.zeros_like(v)
    warm = int(WARMUP * ITERATIONS)
    for t in range(1, ITERATIONS + 1):
        sig = 1.0 / (1.0 + np.exp(-v))
        h = np.clip(sig * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)
        e = base + h - w / s  # the error in INT8 steps
        grad_h = 2.0 * (e @ gram) / norm
        if t > warm:
            beta = BETA[1] + (BETA[0] - BETA[1]) * (1 - (t - warm) / (ITERATIONS - warm))
            x = np.abs(2 * h - 1)
            grad_h += REG_WEIGHT * beta * x ** (beta - 1) * np.sign(2 * h - 1) * -2.0
        inside = (h > 0) & (h < 1)
        grad = np.where(inside, grad_h * sig * (1 - sig) * (ZETA - GAMMA), 0.0)
        grad[fixed] = 0.0
        m = 0.9 * m + 0.1 * grad
        u = 0.999 * u + 0.001 * grad * grad
        v -= LEARNING_RATE * (m / (1 - 0.9**t)) / (np.sqrt(u / (1 - 0.999**t)) + 1e-8)
    q = base + (_h(v) >= 0.5)
    q[fixed] = np.round(w / s)[fixed]
    q = np.clip(q, -127, 127)
    return q[0] if single else q


def round_layer(layer: Linear, grams: np.ndarray) -> tuple[float, float]:
    """Replace the layer's weight by its learned INT8 grid values; the
    output error Σ dᵀGd of nearest rounding and of the learned one."""
    groups, k = grams.shape[0], grams.shape[-1]
    rows = layer.out_major().astype(np.float64).reshape(groups, -1, k)
    scales = layer.row_scales().reshape(groups, -1)
    q = learn_rows(rows, scales, grams)
    new_rows = q * scales[..., None]

    def error(other: np.ndarray) -> float:
        d = other - rows
        return float(np.sum(np.matmul(d, grams) * d))

    before = error(layer.quantized_rows().reshape(rows.shape))
    after = error(new_rows)
    new_rows = new_rows.reshape(-1, k)
    if after < before:
        layer.set_out_major(new_rows)
    return before, after


def learn_rounding(
    interp: TopInterpreter,
    store: WeightStore,
    samples: Sequence[Any],
    load: Callable[[Any], dict[str, np.ndarray]],
    progress: Callable[[Iterable, str], Iterable],
) -> list[tuple[str, float, float]]:
    """Learn every layer's rounding (in place in `store`): (layer, error of
    nearest rounding, error of the learned one) per layer."""
    chosen = {}
    for layer in linears((s.op for s in interp.steps), store):
        k = int(np.prod(layer.weight.shape[1:])) if layer.is_conv else layer.in_channels()
        if k <= MAX_PATCH:
            chosen[layer.op] = (layer, np.zeros((layer.group, k, k)))
    meter = GramMeter(chosen)
    for sample in progress(samples, "adaround inputs"):
        interp.run(store, load(sample), observe=meter.observe)
    report = []
    for layer, grams in progress(list(chosen.values()), "adaround layers"):
        before, after = round_layer(layer, grams)
        report.append((layer.name, before, after))
    return report
