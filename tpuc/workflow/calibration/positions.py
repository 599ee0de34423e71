"""Outputs judged position by position: the automatic mixed precision's
measure of a classifier applied at every position of a sequence.

A CTC text recognizer (PP-OCRv4 rec: a Softmax over 6,625 classes at each
of 40 positions) is read by its best class per position, and its FP32
logits are often near ties: an error far too small to move the logits'
cosine flips a character. PP-OCRv4 rec's logits keep a cosine of 0.996 on
its calibration lines while 4 of their 160 positions read another class,
and only 0.70 of its 27 skimage test lines read FP32's text. So such an
output is judged by what its user reads: the share of positions whose best
class in INT8 is FP32's, pooled over the samples, and the growth goes on
until every position agrees — every position but the near ties the chip's
float mode itself reads otherwise (measured once, with every layer in F16:
no float layer set can do better there, and the growth would float every
layer for nothing; PP-OCRv4 rec's calibration lines have none, all 160
positions agree in F16).

Which outputs: those computed by a Softmax over their last axis with more
than one position (the axes between the batch axis and the classes) — a
measured fact about the output, not a model name. A single-position
classifier (resnet50's 1,000 classes) is judged by its logits' cosine as
before: a top-1 near tie there is one sample in a thousand, not one
character in every line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType


@dataclass(frozen=True)
class Agreement:
    """Positions whose best class agrees with FP32's, of the positions counted."""

    agreeing: int = 0
    positions: int = 0

    def __add__(self, other: Agreement) -> Agreement:
        return Agreement(self.agreeing + other.agreeing, self.positions + other.positions)

    @property
    def share(self) -> float:
        return self.agreeing / self.positions if self.positions else 1.0

    @property
    def complete(self) -> bool:
        return self.agreeing == self.positions

    def __str__(self) -> str:
        return f"{self.agreeing}/{self.positions}"


def disagreeing(quantized: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per position (every index but the last axis): whether `quantized`'s
    best class along the last axis differs from `reference`'s (the first
    of equal values, as numpy's argmax and a greedy decoder take it)."""
    quantized, reference = np.asarray(quantized), np.asarray(reference)
    if quantized.shape != reference.shape:
        raise ValueError(f"shapes differ: {quantized.shape} in INT8, {reference.shape} in float")
    return np.argmax(quantized, axis=-1) != np.argmax(reference, axis=-1)


def argmax_agreement(
    quantized: np.ndarray, reference: np.ndarray, ties: np.ndarray | None = None
) -> Agreement:
    """The positions where `quantized` and `reference` have the same best
    class, of those not marked in `ties` (positions FP32 holds only as a
    near tie: the chip's float mode itself reads another class there)."""
    differs = disagreeing(quantized, reference)
    counted = ~ties if ties is not None else np.ones_like(differs)
    return Agreement(int((counted & ~differs).sum()), int(counted.sum()))


def per_position_outputs(module: ModuleOp) -> list[str]:
    """The outputs a Softmax over their last axis computes, with more than
    one position per batch element (the dims between the first and the last)."""
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.core import output_names

    producers = {n: op for op in module.walk() if isinstance(op, TensorOp) for n in op.names}
    found = []
    for name in output_names(module):
        op = producers.get(name)
        if not isinstance(op, top.SoftmaxOp) or not isinstance(op.results[0].type, TensorType):
            continue
        shape = op.results[0].type.get_shape()
        axis = int(op.value("axis"))
        if len(shape) >= 3 and axis % len(shape) == len(shape) - 1 and math.prod(shape[1:-1]) > 1:
            found.append(name)
    return found
