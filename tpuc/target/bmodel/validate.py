"""Semantic checks of a decoded bmodel, before anything runs.

The container reader checks that the file parses and that its payloads
match their digests; this checks that what it says is coherent, so that a
file from another writer (no digest) or a damaged one re-signed by mistake
fails with one line instead of running to wrong outputs: counts and lists
that cannot be empty, every tensor's byte size against its shape and dtype,
every input/output tensor inside the activation or coefficient region,
quantization fields inside their storage ranges, subnet links, and each
command group's byte counts against its streams.
"""

from __future__ import annotations

import math

from tpuc.base.dtypes import DTYPE_BYTES
from tpuc.base.errors import TpucError
from tpuc.target.bmodel.model import BModel, CmdGroup, NetParameter, SubNet, TensorDesc

MAX_RANK = 8
# No tensor of a simulated bmodel is this large (the chips' global memory
# is at most a few GiB); dims past it are damage, not models.
MAX_ELEMENTS = 1 << 32
STORAGE_RANGES = {"i8": (-128, 127), "u8": (0, 255), "i16": (-(1 << 15), (1 << 15) - 1)}


def validate_model(model: BModel, source: str) -> None:
    """Raise a one-line TpucError naming `source` and the first
    inconsistency found."""
    if not model.nets:
        raise TpucError(f"{source}: the bmodel has no network")
    if model.neuron_size < 0:
        raise TpucError(f"{source}: negative neuron_size {model.neuron_size}")
    for net in model.nets:
        if not net.parameters:
            raise TpucError(f"{source}: net '{net.name}' has no stage (parameter list empty)")
        for index, param in enumerate(net.parameters):
            _Checker(model, param, f"{source}: net '{net.name}' stage {index}").check()


class _Checker:
    """The checks of one net stage; `where` prefixes every message."""

    def __init__(self, model: BModel, param: NetParameter, where: str):
        self.model, self.param, self.where = model, param, where
        ctx = (param.ctx_addr, param.ctx_addr + param.ctx_size)
        coeff = (param.coeff_addr, param.coeff_addr + len(param.coeff))
        self.regions = {"activations": ctx, "coefficients": coeff}

    def fail(self, message: str) -> TpucError:
        return TpucError(f"{self.where}: {message}")

    def check(self) -> None:
        p = self.param
        if self.model.neuron_size and p.ctx_size > self.model.neuron_size:
            raise self.fail(
                f"activation size {p.ctx_size} exceeds the model's neuron_size "
                f"{self.model.neuron_size}"
            )
        if not p.outputs:  # no inputs is fine: a model may compute constants
            raise self.fail("the output tensor list is empty")
        for what, tensors in (("input", p.inputs), ("output", p.outputs)):
            for t in tensors:
                self.tensor(t, f"{what} '{t.name}'")
        if len({t.name for t in p.inputs}) != len(p.inputs):
            raise self.fail(f"two inputs share a name ({', '.join(t.name for t in p.inputs)})")
        if not p.subnets:
            raise self.fail("the subnet list is empty")
        self.subnets(p.subnets)
        # an output is written by a subnet, or is (an in-place view of) a net
        # input or a subnet's output, or a constant in the coefficients
        spans = [(t.device_addr, t.device_addr + t.size) for s in p.subnets for t in s.outputs]
        spans += [(t.device_addr, t.device_addr + t.size) for t in p.inputs]
        spans.append(self.regions["coefficients"])
        for t in p.outputs:
            end = t.device_addr + t.size
            if not any(lo <= t.device_addr and end <= hi for lo, hi in spans):
                raise self.fail(
                    f"output '{t.name}' (at {t.device_addr:#x}, {list(t.shape)} {t.dtype}) is "
                    "neither written by a subnet nor a net input"
                )

    def tensor(self, t: TensorDesc, what: str) -> None:
        """Shape, size, place and quantization of one tensor."""
        if len(t.shape) > MAX_RANK:
            raise self.fail(f"{what}: rank {len(t.shape)} exceeds {MAX_RANK}")
        count = math.prod(t.shape)
        if count > MAX_ELEMENTS:
            raise self.fail(f"{what}: shape {list(t.shape)} is implausibly large")
        nbytes = count * DTYPE_BYTES[t.dtype]
        if t.device_addr % DTYPE_BYTES[t.dtype]:
            raise self.fail(f"{what}: address {t.device_addr:#x} is not aligned to its {t.dtype}")
        if t.size != nbytes:
            raise self.fail(
                f"{what}: size {t.size} bytes, but shape {list(t.shape)} of {t.dtype} "
                f"takes {nbytes}"
            )
        regions = self.regions.values()
        if not any(lo <= t.device_addr and t.device_addr + t.size <= hi for lo, hi in regions):
            raise self.fail(
                f"{what}: [{t.device_addr:#x}, {t.device_addr + t.size:#x}) lies outside the "
                + " and ".join(f"{n} [{lo:#x}, {hi:#x})" for n, (lo, hi) in self.regions.items())
            )
        if not math.isfinite(t.scale) or t.scale <= 0:
            raise self.fail(f"{what}: quantization scale {t.scale} is not a positive number")
        bounds = STORAGE_RANGES.get(t.dtype)
        if bounds is not None and not bounds[0] <= t.zero_point <= bounds[1]:
            raise self.fail(f"{what}: zero point {t.zero_point} is outside {t.dtype}'s range")

    def subnets(self, subnets: list[SubNet]) -> None:
        ids = [s.id for s in subnets]
        if len(set(ids)) != len(ids):
            raise self.fail(f"subnet ids repeat: {ids}")
        for s in subnets:
            where = f"subnet {s.id}"
            for nxt in s.next_ids:
                if nxt not in ids or nxt == s.id:
                    raise self.fail(f"{where}: next subnet {nxt} does not exist")
            if s.mode == "TPU":
                if not s.cmd_groups or s.cpu_params:
                    raise self.fail(f"{where}: a TPU subnet needs command groups and no CPU layers")
                for g, group in enumerate(s.cmd_groups):
                    self.group(group, f"{where} group {g}")
            elif not s.cpu_params or s.cmd_groups:
                raise self.fail(f"{where}: a CPU subnet needs CPU layers and no command groups")
            for t in s.inputs:
                self.tensor(t, f"{where} input '{t.name}'")
            for t in s.outputs:
                self.tensor(t, f"{where} output '{t.name}'")

    def group(self, group: CmdGroup, where: str) -> None:
        for engine, data, count, nbytes in (
            ("TIU", group.bdc, group.bdc_num, group.bdc_cmd_byte),
            ("GDMA", group.gdma, group.gdma_num, group.gdma_cmd_byte),
        ):
            if nbytes != len(data):
                raise self.fail(
                    f"{where}: the {engine} stream has {len(data)} bytes, "
                    f"its cmd_byte says {nbytes}"
                )
            if bool(count) != bool(data):
                raise self.fail(f"{where}: {count} {engine} commands in {len(data)} bytes")
