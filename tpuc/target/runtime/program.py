"""A bmodel loaded into a simulated device, ready to run.

Loading checks the file (container checks in tpuc.target.bmodel; here: the chip is
known, every region and command operand lies inside the chip's global
memory and inside the bmodel's regions), places the coefficients, and turns
every command into a step. `run` writes the inputs, executes the subnets in
order (TPU subnets: the TIU and GDMA streams interleaved by their sync ids;
CPU subnets: on the host), and reads the outputs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from tpuc.base.dtypes import to_storage
from tpuc.base.errors import TpucError
from tpuc.kernels.cast import stored_input, to_real
from tpuc.kernels.executor import Executor
from tpuc.target.bmodel import (
    BModel,
    NetParameter,
    SubNet,
    TensorDesc,
    input_scale,
    load_bmodel_file,
)
from tpuc.target.bmodel.model import select_stage
from tpuc.target.bmodel.validate import validate_model
from tpuc.target.chips import get_chip
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    ENGINE_TIU,
    ENGINES,
    SPACE_GLOBAL,
    TENSOR_QUANTIZED,
    Command,
    TensorRecord,
    split_commands,
)
from tpuc.target.runtime.device import Device, Region
from tpuc.target.runtime.engine import Step, element_of, engine_step
from tpuc.target.runtime.hazards import check_hazards
from tpuc.target.runtime.validate import build_step


def interleave(tiu: list[Command], gdma: list[Command], what: str) -> list[Command]:
    """The two engines' streams in an order that honours every wait: a
    command runs once the other engine has finished its `wait_id`."""
    order: list[Command] = []
    done = {ENGINE_TIU: 0, ENGINE_GDMA: 0}
    queues = {ENGINE_TIU: list(reversed(tiu)), ENGINE_GDMA: list(reversed(gdma))}
    while queues[ENGINE_TIU] or queues[ENGINE_GDMA]:
        progressed = False
        for engine, other in ((ENGINE_TIU, ENGINE_GDMA), (ENGINE_GDMA, ENGINE_TIU)):
            queue = queues[engine]
            while queue and queue[-1].header.wait_id <= done[other]:
                cmd = queue.pop()
                done[engine] = cmd.header.cmd_id
                order.append(cmd)
                progressed = True
        if not progressed:
            raise TpucError(f"{what}: the TIU and GDMA streams wait for each other (deadlock)")
    return order


def command_name(what: str, command: Command, index: int) -> str:
    """'<subnet> TIU command 3': the engine and the command's 0-based index
    in its engine's stream (CPU commands: in the subnet's cpu_param list)."""
    header = command.header
    engine = ENGINES.get(header.engine, f"engine {header.engine}")
    position = header.cmd_id - 1 if header.cmd_id else index
    return f"{what} {engine} command {position}"


class Program:
    """A loaded bmodel: one stage (`stage`, an index) of its first network."""

    def __init__(
        self,
        model: BModel,
        source: str,
        threads: int | None = None,
        device: str | None = None,
        stage: int = 0,
    ):
        self.model, self.source = model, source
        validate_model(model, source)  # fields coherent before anything is placed or run
        self.net = model.nets[0]
        self.param: NetParameter = self.net.parameters[stage]
        self.chip = self._chip(device)
        self.device = Device(
            self.chip.name,
            self.chip.gmem_start,
            self.chip.gmem_bytes,
            self.chip.npu_num,
            self.chip.lmem_bytes,
        )
        self.coeff = self._region("coefficients", self.param.coeff_addr, len(self.param.coeff))
        self.coeff.bytes[:] = np.frombuffer(self.param.coeff, np.uint8)
        self.neurons = self._region("activations", self.param.ctx_addr, self.param.ctx_size)
        self.subnets = [(s, self._steps(s)) for s in self._ordered_subnets()]
        # the last command writing each global (address, shape, dtype): outputs' producers
        self.records = {
            (r.addr, r.shape, r.dtype): r
            for _, steps in self.subnets
            for st in steps
            for r in st.command.results
            if r.space == SPACE_GLOBAL
        }
        self.executor = Executor(threads)

    def _chip(self, device: str | None):
        """The bmodel's chip, which must be the simulated device's."""
        try:
            chip = get_chip(self.model.chip)
        except TpucError:
            raise TpucError(f"{self.source}: bmodel for unknown chip '{self.model.chip}'") from None
        if device is not None and get_chip(device) != chip:
            raise TpucError(
                f"{self.source}: the bmodel is for {self.model.chip}, the device is "
                f"{get_chip(device).name}; compile it for that chip (model_deploy.py --chip)"
            )
        return chip

    def _region(self, name: str, start: int, size: int) -> Region:
        try:
            return self.device.allocate(name, start, size)
        except TpucError as exc:
            raise TpucError(f"{self.source}: {exc}") from None

    def _ordered_subnets(self) -> list[SubNet]:
        subnets = {s.id: s for s in self.param.subnets}
        order, current = [], 0 if subnets else None
        while current is not None:
            if current not in subnets or subnets[current] in order:
                raise TpucError(f"{self.source}: subnet {current} is missing or repeats")
            order.append(subnets[current])
            nexts = subnets[current].next_ids
            current = nexts[0] if nexts else None
        return order

    def _steps(self, subnet: SubNet) -> list[Step]:
        what = f"{self.source}: subnet {subnet.id}"
        streams: list[tuple[list[Command], list[Command]]] = []
        try:
            if subnet.mode == "CPU":
                commands = [
                    split_commands(p.param, 1, f"{what} cpu op {i}")[0]
                    for i, p in enumerate(subnet.cpu_params)
                ]
            else:
                commands = []
                for g, group in enumerate(subnet.cmd_groups):
                    tiu = split_commands(group.bdc, group.bdc_num, f"{what} group {g} TIU")
                    gdma = split_commands(group.gdma, group.gdma_num, f"{what} group {g} GDMA")
                    commands += interleave(tiu, gdma, f"{what} group {g}")
                    streams.append((tiu, gdma))
        except ValueError as exc:
            raise TpucError(f"{self.source}: corrupt command stream: {exc}") from None
        steps = [
            build_step(engine_step, c, self.device, command_name(what, c, i))
            for i, c in enumerate(commands)
        ]
        for tiu, gdma in streams:  # records are bounds-checked by now
            check_hazards(tiu, gdma, self.device, lambda c, i: command_name(what, c, i))
        return steps

    # --- running ---------------------------------------------------------------------

    def _write_input(self, desc: TensorDesc, array: np.ndarray) -> None:
        expected = tuple(desc.shape)
        if array.shape != expected:
            raise TpucError(
                f"input '{desc.name}' has shape {list(array.shape)}, "
                f"the bmodel expects {list(expected)}"
            )
        record = desc_record(desc, network_input=True)
        floating = desc.dtype in ("f32", "f16", "bf16")
        if array.dtype.kind not in ("f" if floating else "fiu"):
            raise TpucError(
                f"input '{desc.name}' has dtype {array.dtype}, the bmodel's input is {desc.dtype}"
            )
        stored = stored_input(array, element_of(record), desc.name)
        self.device.write(record, self.neurons, stored)

    def records_for(self, desc: TensorDesc) -> TensorRecord:
        """An output's exact record (f64 scale) from the command writing it."""
        found = self.records.get((desc.device_addr, tuple(desc.shape), desc.dtype))
        return found if found is not None else desc_record(desc)

    def run(
        self,
        inputs: Mapping[str, np.ndarray],
        *,
        out_fixed: bool = False,
        dump: list[dict] | None = None,
    ) -> dict[str, np.ndarray]:
        """Outputs by name: real values, or with `out_fixed` the stored
        integers of quantized outputs. `dump`: tensor_location rows
        (layer_id, name, address, dtype, shape, scale, zero_point) of
        intermediate tensors to return as well, each read right after the
        commands of its layer (or, for layers without commands such as
        in-place reshapes, before the next layer's first command)."""
        missing = [d.name for d in self.param.inputs if d.name not in inputs]
        if missing:
            raise TpucError(f"inputs missing for the bmodel: {', '.join(missing)}")
        for desc in self.param.inputs:
            self._write_input(desc, np.asarray(inputs[desc.name]))
        dumper = Dumper(self, dump or [], out_fixed)
        with np.errstate(all="ignore"), self.executor.active():
            try:
                for _, steps in self.subnets:
                    for step in steps:
                        layer = step.command.header.layer_id
                        dumper.before(layer)
                        step.run()
                        dumper.after(layer)
            finally:
                self.executor.arena.finish()
        dumper.before(None)
        outputs = {d.name: self.value(self.records_for(d), out_fixed) for d in self.param.outputs}
        return {**dumper.values, **outputs}

    def value(self, record: TensorRecord, out_fixed: bool) -> np.ndarray:
        """A tensor's current contents: real values, or stored ones."""
        stored = self.device.read(record, self.device.region(record, "tensor"))
        if record.dtype in ("f32", "f16", "bf16"):
            return np.asarray(stored, np.float32)
        if (
            out_fixed and record.flags & TENSOR_QUANTIZED
        ):  # in their own dtype, as TPU-MLIR saves them
            return to_storage(np.asarray(stored), record.dtype)
        return to_real(stored, element_of(record))


class Dumper:
    """Reads tensors by their tensor_location rows while a run goes on."""

    def __init__(self, program: Program, rows: list[dict], out_fixed: bool):
        self.program, self.out_fixed = program, out_fixed
        self.pending: dict[int, list[tuple[str, TensorRecord]]] = {}
        for row in rows:
            record = TensorRecord(
                int(row["address"]),
                row["dtype"],
                tuple(row["shape"]),
                flags=TENSOR_QUANTIZED if row.get("quantized") else 0,
                scale=float(row.get("scale", 1.0)),
                zero_point=int(row.get("zero_point", 0)),
            )
            self.pending.setdefault(int(row["layer_id"]), []).append((row["name"], record))
        self.values: dict[str, np.ndarray] = {}

    def before(self, layer: int | None) -> None:
        """Layers before `layer` (all when None) that ran no command."""
        for done in sorted(k for k in self.pending if layer is None or k < layer):
            self.after(done)

    def after(self, layer: int) -> None:
        for name, record in self.pending.pop(layer, []):
            self.values[name] = self.program.value(record, self.out_fixed)


def desc_record(desc: TensorDesc, network_input: bool = False) -> TensorRecord:
    """A bmodel Tensor as a tensor record (8-bit integers are quantized; a
    network input's Tensor.scale is 1/S, `input_scale`)."""
    quantized = desc.dtype in ("i8", "u8")
    return TensorRecord(
        desc.device_addr,
        desc.dtype,
        tuple(desc.shape),
        flags=TENSOR_QUANTIZED if quantized else 0,
        scale=input_scale(desc.scale) if quantized and network_input else desc.scale,
        zero_point=desc.zero_point,
        storage_min=-128 if desc.dtype == "i8" else 0,
        storage_max=127 if desc.dtype == "i8" else 255,
    )


def load_bmodel(
    path: str | os.PathLike[str],
    threads: int | None = None,
    device: str | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Program:
    """Load and check a bmodel file into a simulated device (of `device`'s
    chip when given, else of the bmodel's); one-line TpucError when bad.
    `shapes` (input name -> shape) picks the stage of a combined bmodel
    whose inputs have those shapes, as the vendor runtime does (default:
    the first stage)."""
    model = load_bmodel_file(path)
    stage = 0
    if shapes is not None and model.nets and len(model.nets[0].parameters) > 1:
        stages = [[(t.name, t.shape) for t in p.inputs] for p in model.nets[0].parameters]
        stage = select_stage(stages, dict(shapes), str(path))
    return Program(model, str(path), threads, device, stage)
