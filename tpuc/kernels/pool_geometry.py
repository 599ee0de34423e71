"""The window geometry of a pooling op: output sizes, the end padding
ceil_mode adds, the number of elements each window averages.

Pure arithmetic on the op's attributes and the input shape, shared by the
float pooling kernel and the INT8 lowering (which asks whether every window
averages the same count), so it sits below both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def ints(op: Any, key: str, default: Sequence[int] = ()) -> list[int]:
    """An integer-list attribute, or `default` when absent or empty."""
    value = op.value(key)
    return [int(v) for v in value] if value else list(default)


class PoolGeometry:
    """Output sizes and the end padding that ceil_mode may add."""

    def __init__(
        self,
        kernel: Sequence[int],
        strides: Sequence[int],
        pads: Sequence[int],
        ceil: bool,
        sizes: Sequence[int],
    ):
        """`strides`, `pads` empty: ONNX defaults; `sizes`: the spatial input dims."""
        self.kernel = list(kernel)
        n = len(self.kernel)
        self.strides = list(strides) or [1] * n
        pads = list(pads) or [0] * (2 * n)
        self.begins, self.ends = pads[:n], pads[n:]
        self.sizes = tuple(sizes)
        self.out = [self.out_size(i, ceil) for i in range(n)]
        self._counts: dict[bool, np.ndarray] = {}
        # padding actually read at the end (ceil_mode may need more than `ends`)
        self.read_ends = [
            max(0, (o - 1) * s + k - size - b)
            for o, s, k, size, b in zip(
                self.out, self.strides, self.kernel, self.sizes, self.begins, strict=True
            )
        ]

    @staticmethod
    def of(op: Any, x: np.ndarray) -> PoolGeometry:
        """The geometry of a pooling op (attributes read with `op.value`) for x."""
        kernel = ints(op, "kernel_shape")
        sizes = x.shape[x.ndim - len(kernel) :]
        return PoolGeometry(
            kernel, ints(op, "strides"), ints(op, "pads"), bool(op.value("ceil_mode")), sizes
        )

    def out_size(self, i: int, ceil: bool) -> int:
        span = self.sizes[i] + self.begins[i] + self.ends[i] - self.kernel[i]
        out = (-(-span // self.strides[i]) if ceil else span // self.strides[i]) + 1
        if ceil and (out - 1) * self.strides[i] >= self.sizes[i] + self.begins[i]:
            out -= 1  # the last window must start inside the input or left pad
        return out

    def counts(self, include_pad: bool) -> np.ndarray:
        """Number of elements averaged at each output position."""
        cached = self._counts.get(include_pad)
        if cached is None:
            cached = self._counts[include_pad] = self._count(include_pad)
        return cached

    def _count(self, include_pad: bool) -> np.ndarray:
        per_axis = []
        for i in range(len(self.kernel)):
            lo_bound = -self.begins[i] if include_pad else 0
            hi_bound = self.sizes[i] + (self.ends[i] if include_pad else 0)
            start = np.arange(self.out[i]) * self.strides[i] - self.begins[i]
            stop = start + self.kernel[i]
            per_axis.append(np.minimum(stop, hi_bound) - np.maximum(start, lo_bound))
        grid = per_axis[0]
        for c in per_axis[1:]:
            grid = np.multiply.outer(grid, c)
        return grid.astype(np.float32)

    def is_global(self) -> bool:
        return (
            list(self.sizes) == self.kernel
            and not any(self.begins)
            and not any(self.ends)
            and all(o == 1 for o in self.out)
        )
