"""Seeded weights for the small ONNX test models."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper


def normal_init(rng: np.random.Generator):
    """init(name, shape, scale=0.3): an f32 initializer drawn from `rng`
    (the model's own generator, so its other draws keep their order)."""

    def init(name: str, shape, scale: float = 0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    return init
