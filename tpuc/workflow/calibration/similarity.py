"""FP32 vs INT8 output cosine: what every calibration technique is judged by.

The reference is fixed when the meter is made (the float outputs of the
module as model_transform wrote it), so a technique that changes the float
function (bias correction, learned rounding) is still measured against the
original network. The INT8 side is the module lowered by the passes
model_deploy.py runs, with a calibration table (and optionally a qtable),
and run by the TPU interpreter.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table
from tpuc.base.compare import cosine_similarity
from tpuc.base.errors import TpucError
from tpuc.ir.weights import WeightStore, attach_weights

Inputs = Mapping[str, np.ndarray]


class Similarity:
    """Scores (module, weights, table entries) by the mean output cosine
    against fixed float outputs on a few samples."""

    def __init__(self, reference: Sequence[Mapping[str, np.ndarray]], inputs: Sequence[Inputs],
                 output_names: Sequence[str], chip: str):  # fmt: skip
        if not inputs:
            raise TpucError("measuring INT8 similarity needs at least one sample")
        self.reference = list(reference)
        self.inputs = list(inputs)
        self.output_names = list(output_names)
        self.chip = chip
        self._tmp = tempfile.TemporaryDirectory(prefix="tpuc_similarity_")
        self.evaluations = 0

    @classmethod
    def of_float(cls, module: ModuleOp, interp, store, inputs: Sequence[Inputs],
                 chip: str) -> Similarity:  # fmt: skip
        """The meter whose reference is the float outputs of `module` (run by
        its TOP interpreter `interp`) as its weights are now."""
        from tpuc.ir.core import output_names

        reference = [interp.run(store, x) for x in inputs]
        return cls(reference, inputs, output_names(module), chip)

    def close(self) -> None:
        self._tmp.cleanup()

    def table_file(self, entries: Mapping[str, CaliEntry], tag: str = "table") -> Path:
        """`entries` written as a table in the meter's scratch folder."""
        path = Path(self._tmp.name) / tag
        text = format_table(CaliTable(entries=dict(entries)), mlir="module.mlir", methods=["kl"],
                            histogram_bins=0, samples=0, tune_num=0)  # fmt: skip
        path.write_text(text)
        return path

    def cosine(self, module: ModuleOp, store: WeightStore, entries: Mapping[str, CaliEntry],
               qtable: Path | None = None) -> float:  # fmt: skip
        """Mean output cosine of the INT8 module against the reference."""
        return float(np.mean(self.cosines(module, store, entries, qtable)))

    def cosines(self, module: ModuleOp, store: WeightStore, entries: Mapping[str, CaliEntry],
                qtable: Path | None = None) -> list[float]:  # fmt: skip
        """Each sample's output cosine (mean over outputs), INT8 vs reference."""
        from tpuc.interp.tpu_interpreter import TpuInterpreter
        from tpuc.ir.weights import weights_of
        from tpuc.workflow.deploy import lower

        lowered = module.clone()
        attach_weights(lowered, WeightStore(store))
        table = self.table_file(entries)
        lower(lowered, self.chip, "INT8", cali_table=table, qtable=qtable)
        interp = TpuInterpreter(lowered)
        weights = weights_of(lowered)
        cosines = []
        for x, ref in zip(self.inputs, self.reference, strict=True):
            out = interp.real_values(interp.run(weights, x))
            cosines.append(np.mean([cosine_similarity(out[n], ref[n]) for n in self.output_names]))
        self.evaluations += 1
        return [float(c) for c in cosines]
