"""What calibration knows about one tensor after all samples: the numbers
every threshold method reads.

Statistics are gathered in two streamed passes over the samples (see
`collect`): the first finds each tensor's range (and moments), the second
builds the histogram of |x| over that final range, as TPU-MLIR does, so no
activation is kept from one sample to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class TensorStats:
    """Statistics of one tensor over every calibration sample.

    The histogram follows TPU-MLIR: `bins` buckets of |x| with width
    `absmax / (bins - 1)`; value v falls in bucket `floor(|v| / width + 0.5)`
    (bucket i is centred on i*width, the last one on absmax). Exact zeros are
    left out of `hist` and counted in `zeros` (ReLU outputs are half zeros;
    KL ignores them, percentile and MSE add them back). NaN/Inf are left out
    of everything and counted in `nonfinite`."""

    name: str
    min: float = float("inf")
    max: float = float("-inf")
    count: int = 0  # finite values seen
    zeros: int = 0  # exact zeros among them
    nonfinite: int = 0
    total: float = 0.0  # sum of x (float64)
    total_sq: float = 0.0  # sum of x*x
    total_abs_dev: float = 0.0  # sum of |x - mean|, pass two
    hist: np.ndarray | None = None  # int64 counts, zeros excluded
    width: float = 0.0

    @property
    def absmax(self) -> float:
        if self.count == 0:
            return 0.0
        return max(abs(self.min), abs(self.max))

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def std(self) -> float:
        if not self.count:
            return 0.0
        var = self.total_sq / self.count - self.mean**2
        return float(np.sqrt(max(var, 0.0)))

    @property
    def mean_abs_dev(self) -> float:
        """E|x - mean|: the Laplace scale b that ACIQ-Laplace clips by."""
        return self.total_abs_dev / self.count if self.count else 0.0
