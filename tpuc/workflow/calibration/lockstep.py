"""One sample through two interpreters in lock step, compared tensor by tensor.

The output-cosine growth (float_growth.py) compares every tensor of an
INT8 run with the float run's. Dumping both runs held every tensor of a
sample twice: run_calibration's peak RSS went 2.1× (resnet50) and 2.4×
(ppocr_det) of what calibration alone needs. Here the two runs advance
op by op (`TopInterpreter.stream`): the INT8 run leads, and the float run
goes on until it has computed the tensor the INT8 run just gave; a tensor
is held only until its partner arrives, then handed over as a pair and
dropped. With both modules in the same op order (lowering keeps the TOP
order) at most a tensor or two wait at any time, so the check costs the
two runs' own working sets rather than two copies of the network's
activations.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

import numpy as np

from tpuc.dialects import top
from tpuc.interp.top_interpreter import TopInterpreter

Arrays = Mapping[str, np.ndarray]
Pair = tuple[str, np.ndarray, np.ndarray]  # name, the leading run's array, the other's


def final_steps(interp: TopInterpreter) -> dict[str, int]:
    """Tensor name -> the index of the last step computing it, weights and
    None aside (a name given twice keeps its last value, as in a dump_all)."""
    return {
        name: i
        for i, step in enumerate(interp.steps)
        if not isinstance(step.op, top.WeightOp | top.NoneOp)
        for name in step.names
    }


class Lockstep:
    """Two interpreters prepared to run samples side by side, pairing the
    tensors named in `wanted` that both compute."""

    def __init__(self, lead: TopInterpreter, follow: TopInterpreter, wanted: Collection[str]):
        self.lead, self.follow = lead, follow
        self.lead_steps, self.follow_steps = final_steps(lead), final_steps(follow)
        self.wanted = {n for n in wanted if n in self.lead_steps and n in self.follow_steps}
        self.most_held = 0  # the most tensors waiting for a partner at once, over all runs

    def pairs(self, lead_weights: Arrays, follow_weights: Arrays, inputs: Arrays) -> Iterator[Pair]:
        """(name, lead's array, follow's array) of every wanted tensor, each
        as soon as both runs have computed it; neither run keeps it after."""
        lead = self._offers(self.lead, self.lead_steps, lead_weights, inputs)
        follow = self._offers(self.follow, self.follow_steps, follow_weights, inputs)
        early: dict[str, np.ndarray] = {}  # the follower's, ahead of the lead
        for name, ours in lead:
            theirs = early.pop(name, None)
            if theirs is None:
                theirs = self._catch_up(follow, name, early)
            if theirs is None:
                continue  # the follower ended without it: not wanted after all
            self.most_held = max(self.most_held, len(early) + 2)
            yield name, ours, theirs
            ours = theirs = None

    @staticmethod
    def _catch_up(follow: Iterator[tuple[str, np.ndarray]], name: str,
                  early: dict[str, np.ndarray]) -> np.ndarray | None:  # fmt: skip
        """Run the follower until it computes `name`, holding what it gives
        before (the lead asks for those next when both share the op order)."""
        for other, array in follow:
            if other == name:
                return array
            early[other] = array
        return None

    def _offers(self, interp: TopInterpreter, final: Mapping[str, int], weights: Arrays,
                inputs: Arrays) -> Iterator[tuple[str, np.ndarray]]:  # fmt: skip
        """The wanted tensors of one run, in its order, each at its final step."""
        index = {id(step): i for i, step in enumerate(interp.steps)}
        for step, results in interp.stream(weights, inputs):
            i = index[id(step)]
            for name, array in zip(step.names, results, strict=True):
                if name in self.wanted and final[name] == i:
                    yield name, array
