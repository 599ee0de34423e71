"""SmoothQuant (`run_calibration.py --sq`): move activation outliers into the
weights of the matmuls that read them (Xiao et al., arXiv 2211.10438).

A LayerNorm's output X feeds matmuls X·W. A few channels j of X carry
outliers that set the per-tensor INT8 scale and flatten every other
channel. Dividing channel j of X by s_j (through the LayerNorm's gamma and
beta) and multiplying row j of every W by s_j keeps X·W, with

    s_j = max|X_j|^α / max|W_j|^(1−α)

(max|W_j| over all the matmuls reading X). As TPU-MLIR does, α is searched
over 0, 0.05 … 1 per LayerNorm, by the squared error of the fake-quantized
matmul outputs on the calibration samples; α = 0.5 is the paper's default
and where the search starts, so a tie keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation

from tpuc.base.numerics import fake_quant, fake_quant_per_channel
from tpuc.dialects import top
from tpuc.interp.top_interpreter import Step, TopInterpreter
from tpuc.ir.weights import WeightStore
from tpuc.workflow.calibration.linear import Linear, own_weight, users

DEFAULT_ALPHA = 0.5
ALPHAS = np.round(np.arange(0.0, 1.0001, 0.05), 2)
KEPT_SAMPLES = 4  # activations kept per LayerNorm for the α search


def smooth_scales(act_max: np.ndarray, weight_max: np.ndarray, alpha: float) -> np.ndarray:
    """s_j = act_max_j^α / weight_max_j^(1−α); 1 where that is not a
    positive finite number (a dead channel)."""
    act = np.asarray(act_max, np.float64)
    weight = np.asarray(weight_max, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = act**alpha / weight ** (1.0 - alpha)
    return np.where(np.isfinite(s) & (s > 0), s, 1.0)


@dataclass
class Site:
    """A LayerNorm whose every reader is a matmul with its own weight."""

    norm: Operation
    readers: list[Linear]
    act_max: np.ndarray | None = None
    kept: list[np.ndarray] = field(default_factory=list)
    alpha: float = DEFAULT_ALPHA
    scales: np.ndarray | None = None

    @property
    def name(self) -> str:
        return self.norm.names[0]

    def weight_max(self) -> np.ndarray:
        rows = [np.abs(r.out_major()).max(axis=0) for r in self.readers]  # per input row
        return np.max(rows, axis=0)


def find_sites(ops: Iterable[Operation], store: WeightStore) -> list[Site]:
    """LayerNorms over the last axis with their own gamma (and beta) read
    only by matmuls (as their input) that SmoothQuant can rescale."""
    sites = []
    for op in ops:
        if not isinstance(op, top.LayerNormOp) or own_weight(op, 1) is None:
            continue
        if not isinstance(op.operands[2].owner, top.NoneOp) and own_weight(op, 2) is None:
            continue
        if len(op.value("normalized_shape") or [0]) != 1:
            continue
        readers = [Linear.of(user, store) for user in users(op.results[0])]
        if not readers or any(
            r is None or r.is_conv or r.op.operands[0] is not op.results[0] for r in readers
        ):
            continue
        sites.append(Site(op, readers))
    return sites


class ActivationMeter:
    """Per-channel abs-max of each site's output, and a few samples of it."""

    def __init__(self, sites: Sequence[Site]):
        self.by_op = {site.norm: site for site in sites}

    def observe(self, step: Step, args: list, results: list) -> None:
        site = self.by_op.get(step.op)
        if site is None:
            return
        x = np.asarray(results[0], np.float32)
        per_channel = np.abs(x.reshape(-1, x.shape[-1])).max(axis=0)
        known = site.act_max
        site.act_max = per_channel if known is None else np.maximum(known, per_channel)
        if len(site.kept) < KEPT_SAMPLES:
            site.kept.append(x.copy())


def _loss(site: Site, scales: np.ndarray) -> float:
    """Squared error of the fake-quantized matmuls with these scales."""
    threshold = float((site.act_max / scales).max())
    total = 0.0
    for reader in site.readers:
        w = reader.out_major().T.astype(np.float32)  # [in, out]
        wq = fake_quant_per_channel(w * scales[:, None].astype(np.float32), None)
        for x in site.kept:
            xq = fake_quant(x / scales.astype(np.float32), threshold)
            diff = xq @ wq - x @ w
            total += float(np.square(diff, dtype=np.float64).sum())
    return total


def choose_alpha(site: Site) -> float:
    """The α of the grid with the smallest loss (the default on a tie)."""
    weight_max = site.weight_max()
    order = sorted(ALPHAS, key=lambda a: abs(a - DEFAULT_ALPHA))
    losses = [(_loss(site, smooth_scales(site.act_max, weight_max, a)), a) for a in order]
    return float(min(losses, key=lambda item: item[0])[1])


def apply_site(site: Site, store: WeightStore) -> None:
    """X/s through gamma and beta, s into every reader's weight rows."""
    scales = site.scales
    for index in (1, 2):
        owner = own_weight(site.norm, index)
        if owner is not None:
            name = owner.tensor_name.data
            store[name] = (np.asarray(store[name], np.float64) / scales).astype(np.float32)
    for reader in site.readers:
        rows = reader.out_major().astype(np.float64)  # [out, in]
        reader.set_out_major(rows * scales[None, :])


def smooth(
    interp: TopInterpreter,
    store: WeightStore,
    samples: Sequence[Any],
    load: Callable[[Any], dict[str, np.ndarray]],
    progress: Callable[[Iterable, str], Iterable],
) -> list[Site]:
    """Measure, choose α per site and rescale (in place in `store`)."""
    sites = find_sites((s.op for s in interp.steps), store)
    if not sites:
        return []
    meter = ActivationMeter(sites)
    for sample in progress(samples, "smoothquant"):
        interp.run(store, load(sample), observe=meter.observe)
    done = []
    for site in sites:
        if site.act_max is None:
            continue
        site.alpha = choose_alpha(site)
        site.scales = smooth_scales(site.act_max, site.weight_max(), site.alpha)
        apply_site(site, store)
        site.kept.clear()
        done.append(site)
    return done
