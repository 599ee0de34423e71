"""Softmax correction (`run_calibration.py --smc`), as TPU-MLIR 1.30.2's
calibration/softmax_correction.py does it.

Attention probabilities are small: a row of 100 tokens peaks near 0.01–0.1,
so at the Softmax's INT8 threshold of 1.0 they use a few of 255 steps. For
each Softmax whose only reader is a MatMul taking it as its left operand
(probabilities · V), the mean row maximum per head, s_h (the max over the
last axis, averaged over the samples, then over every axis but the head
axis: 1 for 4-D, 0 for 3-D), is measured, and the module becomes
Softmax → Mul(1/s) → MatMul → Mul(s): the MatMul reads probabilities scaled
to peak near 1, and its result is scaled back, so the float function is
unchanged. The inserted ops and weights take TPU-MLIR's names
(`<softmax>_Smc_Inv_Mul`, `<softmax>_Smc_Inv_Weight`, `<matmul>_Smc_Mul`,
`<softmax>_Smc_Weight`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation

from tpuc.dialects import top
from tpuc.interp.top_interpreter import Step, TopInterpreter
from tpuc.ir.weights import WeightStore, create_weight

HEAD_AXIS = {3: 0, 4: 1}
"""TPU-MLIR's head axis by the Softmax output's rank (other ranks are left alone)."""


@dataclass
class Site:
    """One Softmax → MatMul pair and its measured per-head scale."""

    softmax: Operation
    matmul: Operation
    total: np.ndarray | float = 0.0  # summed row maxima, one sample each
    samples: int = 0
    scale: np.ndarray = field(default_factory=lambda: np.ones(1, np.float32))

    @property
    def name(self) -> str:
        return self.softmax.names[0]


def find_sites(ops: Iterable[Operation]) -> list[Site]:
    """Softmaxes read by exactly one op, a MatMul, as its left operand, whose
    result is not a network output (its name would change)."""
    sites = []
    for op in ops:
        if (
            not isinstance(op, top.SoftmaxOp)
            or len(op.results[0].type.get_shape()) not in HEAD_AXIS
        ):
            continue
        uses = list(op.results[0].uses)
        if len(uses) != 1 or not isinstance(uses[0].operation, top.MatMulOp):
            continue
        matmul = uses[0].operation
        if matmul.operands[0] is not op.results[0]:
            continue
        if any(isinstance(u.operation, func.ReturnOp) for u in matmul.results[0].uses):
            continue
        sites.append(Site(op, matmul))
    return sites


def head_scale(row_max_mean: np.ndarray) -> np.ndarray:
    """Mean over every axis but the head axis, dimensions kept: [1,H,S,1] -> [1,H,1,1]."""
    axis = HEAD_AXIS[row_max_mean.ndim]
    others = tuple(i for i in range(row_max_mean.ndim) if i != axis)
    return row_max_mean.mean(axis=others, keepdims=True).astype(np.float32)


def measure(
    interp: TopInterpreter,
    store: WeightStore,
    sites: Sequence[Site],
    samples: Sequence[Any],
    load: Callable[[Any], dict[str, np.ndarray]],
    progress: Callable[[Iterable, str], Iterable],
) -> None:
    """Each site's scale: its Softmax's row maxima over the samples."""
    by_op = {site.softmax: site for site in sites}

    def observe(step: Step, args: list, results: list) -> None:
        site = by_op.get(step.op)
        if site is not None:
            site.total = site.total + np.max(np.asarray(results[0], np.float64), -1, keepdims=True)
            site.samples += 1

    for sample in progress(samples, "softmax correction"):
        interp.run(store, load(sample), observe=observe)
    for site in sites:
        if site.samples:
            site.scale = head_scale(np.asarray(site.total) / site.samples)


def insert_muls(site: Site) -> None:
    """Softmax → Mul(1/s) → MatMul → Mul(s) → the MatMul's former readers."""
    block = site.matmul.parent_block()
    probs, product = site.softmax.results[0], site.matmul.results[0]
    inverse = create_weight(site.softmax, f"{site.name}_Smc_Inv_Weight", 1.0 / site.scale)
    scaled = top.MulOp.make([probs, inverse.output], f"{site.name}_Smc_Inv_Mul",
                            result_types=[probs.type])  # fmt: skip
    block.insert_ops_before([inverse, scaled], site.matmul)
    site.matmul.operands[0] = scaled.results[0]
    weight = create_weight(site.matmul, f"{site.name}_Smc_Weight", site.scale)
    back = top.MulOp.make([product, weight.output], f"{site.matmul.names[0]}_Smc_Mul",
                          result_types=[product.type])  # fmt: skip
    block.insert_ops_after([weight, back], site.matmul)
    for use in list(product.uses):
        if use.operation is not back:
            use.operation.operands[use.index] = back.results[0]


def correct_softmaxes(
    interp: TopInterpreter,
    store: WeightStore,
    samples: Sequence[Any],
    load: Callable[[Any], dict[str, np.ndarray]],
    progress: Callable[[Iterable, str], Iterable],
) -> list[Site]:
    """Measure and insert every site's Muls (the module of `interp` changes;
    rebuild the interpreter afterwards); the sites corrected."""
    sites = find_sites(step.op for step in interp.steps)
    if not sites:
        return []
    measure(interp, store, sites, samples, load, progress)
    done = [site for site in sites if site.samples]
    for site in done:
        insert_muls(site)
    return done
