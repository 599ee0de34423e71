"""The bmodel as Python data: what codegen fills and the runtime reads.

These dataclasses mirror the flatbuffer tables of bmodel.fbs one to one
but hold the payloads themselves (command streams, coefficients, CPU layer
parameters) as `bytes`; the writer decides where they go in the binary
blob. Values are normalized on construction to what the file can store
(upper-case chip, float32 scale, int shape), so a written and re-read
model compares equal to the one written.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tpuc.base.dtypes import DTYPE_CODES
from tpuc.base.errors import TpucError

# dtype names, codes (TPU-MLIR's bm_data_type_t, Tensor.data_type) and sizes: tpuc.base.dtypes

# SubNet.subnet_mode codes
MODE_CODES: dict[str, int] = {"TPU": 0, "CPU": 1}
MODE_NAMES: dict[int, str] = {code: name for name, code in MODE_CODES.items()}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tpuc")
    except PackageNotFoundError:
        return "dev"


def _float32(value: float) -> float:
    """`value` as the float32 the file stores (Tensor.scale is float32)."""
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


@dataclass(frozen=True)
class Binary:
    """A byte range of the binary blob (offsets from the blob's first byte)."""

    start: int
    size: int


@dataclass
class TensorDesc:
    """An input or output tensor of a net or subnet, in device memory."""

    name: str
    dtype: str  # a key of DTYPE_CODES
    shape: tuple[int, ...]
    device_addr: int
    size: int  # bytes
    scale: float = 1.0
    zero_point: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_CODES:
            known = ", ".join(DTYPE_CODES)
            raise TpucError(f"tensor '{self.name}': unknown bmodel dtype '{self.dtype}' ({known})")
        self.shape = tuple(int(d) for d in self.shape)
        self.scale = _float32(self.scale)
        self.zero_point = int(self.zero_point)


def input_scale(scale: float) -> float:
    """Tensor.scale of a quantized network input as TPU-MLIR writes it
    (BMCodegen): 1/S, the factor a real value is multiplied by to quantize
    it, where every other tensor stores S. Its own inverse: a reader gets S
    back with `input_scale(desc.scale)`, and f32(1/that) is the stored
    float32 1/S exactly, so quantizing with it matches the chip's Cast."""
    return 1.0 / float(scale)


@dataclass
class CmdGroup:
    """The command streams of one group: compute engine (bdc) and DMA (gdma)."""

    bdc: bytes
    gdma: bytes
    bdc_num: int
    gdma_num: int
    bdc_cmd_byte: int
    gdma_cmd_byte: int


@dataclass
class CpuParam:
    """One host-side layer of a CPU subnet: its op type and serialized parameters."""

    op_type: int
    param: bytes


@dataclass
class SubNet:
    """A run of consecutive ops with one run mode ("TPU" or "CPU")."""

    id: int
    mode: str
    cmd_groups: list[CmdGroup] = field(default_factory=list)
    cpu_params: list[CpuParam] = field(default_factory=list)
    inputs: list[TensorDesc] = field(default_factory=list)
    outputs: list[TensorDesc] = field(default_factory=list)
    next_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODE_CODES:
            raise TpucError(f"subnet {self.id}: unknown run mode '{self.mode}' (TPU, CPU)")


@dataclass
class Location:
    """Where one weight lies in a net's coefficient bytes (CoeffMem.location)."""

    name: str
    offset: int
    size: int


@dataclass
class NetParameter:
    """One stage of a net: its tensors, memory regions, coefficients and commands."""

    inputs: list[TensorDesc]
    outputs: list[TensorDesc]
    ctx_addr: int = 0  # activation (neuron) memory start
    ctx_size: int = 0
    coeff_addr: int = 0  # device address the coefficients are loaded at
    coeff: bytes = b""
    cmd_groups: list[CmdGroup] = field(default_factory=list)
    subnets: list[SubNet] = field(default_factory=list)
    coeff_locations: list[Location] = field(default_factory=list)


@dataclass
class Net:
    name: str
    parameters: list[NetParameter]


@dataclass
class BModel:
    """A whole bmodel. `chip` is stored upper-case, as TPU-MLIR writes it."""

    chip: str
    nets: list[Net]
    type: str = "tpuc"
    version: str = field(default_factory=_version)
    time: str = ""
    neuron_size: int = 0

    def __post_init__(self) -> None:
        self.chip = self.chip.upper()


def select_stage(
    stages: list[list[tuple[str, tuple[int, ...]]]], given: dict[str, tuple[int, ...]], where: str
) -> int:
    """The index of the stage whose inputs [(name, shape)] have exactly the
    shapes `given` by name, as the vendor runtime picks a combined bmodel's
    stage; a one-line TpucError listing the stages when none does. A single
    stage is returned as is (its runner names a wrong shape itself)."""
    if len(stages) == 1:
        return 0
    missing = [name for name, _ in stages[0] if name not in given]
    if missing:
        raise TpucError(f"{where}: inputs missing for the bmodel: {', '.join(missing)}")
    for index, inputs in enumerate(stages):
        if all(name in given and tuple(given[name]) == tuple(shape) for name, shape in inputs):
            return index
    offered = "; ".join(
        ", ".join(f"{name} {list(shape)}" for name, shape in inputs) for inputs in stages
    )
    got = ", ".join(f"{name} {list(shape)}" for name, shape in given.items())
    raise TpucError(
        f"{where}: no stage takes inputs of these shapes ({got}); its {len(stages)} stages "
        f"take: {offered}"
    )
