"""The simulated device's global memory: one byte array per used region.

Only the regions a bmodel uses (coefficients, activations) are backed by
host memory, but every address is checked against the chip's whole global
memory, so a bmodel that would not fit the real device fails here too.
"""

from __future__ import annotations

import numpy as np

from tpuc.dtypes import STORAGE, from_storage, to_storage
from tpuc.errors import TpucError
from tpuc.isa.records import SPACE_GLOBAL, SPACE_LOCAL, TensorRecord, element_bytes


class Region:
    def __init__(self, name: str, start: int, size: int):
        self.name, self.start, self.size = name, start, size
        self.bytes = np.zeros(size, np.uint8)

    def holds(self, addr: int, nbytes: int) -> bool:
        return self.start <= addr and addr + nbytes <= self.start + self.size


class Device:
    """Global memory of `gmem_bytes` starting at `gmem_start`; per NPU lane,
    `lmem_bytes` of local memory (`npu_num` lanes; backed on first use)."""

    def __init__(
        self,
        chip: str,
        gmem_start: int,
        gmem_bytes: int,
        npu_num: int = 0,
        lmem_bytes: int = 0,
    ):
        self.chip, self.gmem_start, self.gmem_bytes = chip, gmem_start, gmem_bytes
        self.npu_num, self.lmem_bytes = npu_num, lmem_bytes
        self.regions: list[Region] = []
        self._local: Region | None = None

    def local(self) -> Region:
        """Local memory: lane i at [i·lmem_bytes, (i+1)·lmem_bytes)."""
        if self._local is None:
            self._local = Region("local memory", 0, self.npu_num * self.lmem_bytes)
        return self._local

    def local_region(self, record: TensorRecord, what: str) -> Region:
        """A local record's region; its whole extent must lie in one lane
        (until layer groups distribute channels over the lanes)."""
        low, high = extent(record)
        lane = low // self.lmem_bytes if self.lmem_bytes else 0
        if not self.lmem_bytes or lane >= self.npu_num or low < 0:
            raise TpucError(
                f"{what}: local address {record.addr:#x} is past the {self.npu_num} NPU lanes "
                f"of {self.lmem_bytes} bytes"
            )
        end = (lane + 1) * self.lmem_bytes
        if high > end:
            raise TpucError(
                f"{what}: local [{low:#x}, {high:#x}) runs past lane {lane}'s "
                f"{self.lmem_bytes} bytes (ends at {end:#x})"
            )
        return self.local()

    def allocate(self, name: str, start: int, size: int) -> Region:
        end = self.gmem_start + self.gmem_bytes
        if start < self.gmem_start or start + size > end:
            raise TpucError(
                f"{name} [{start:#x}, {start + size:#x}) lies outside {self.chip}'s global "
                f"memory [{self.gmem_start:#x}, {end:#x})"
            )
        for other in self.regions:
            if start < other.start + other.size and other.start < start + size:
                raise TpucError(f"{name} overlaps {other.name}")
        region = Region(name, start, size)
        self.regions.append(region)
        return region

    def region(self, record: TensorRecord, what: str) -> Region:
        """The region holding the whole strided extent of a tensor record."""
        if record.space == SPACE_LOCAL:
            return self.local_region(record, what)
        if record.space != SPACE_GLOBAL:
            raise TpucError(f"{what}: memory space {record.space} holds no tensor")
        low, high = extent(record)
        for region in self.regions:
            if region.holds(low, high - low):
                return region
        raise TpucError(f"{what}: [{low:#x}, {high:#x}) is outside the bmodel's memory")

    def view(self, record: TensorRecord, region: Region) -> np.ndarray:
        """A strided numpy view of the record's elements (no copy)."""
        size = element_bytes(record.dtype)
        return np.ndarray(
            shape=record.shape,
            dtype=np.dtype(STORAGE[record.dtype]),
            buffer=region.bytes,
            offset=record.addr - region.start,
            strides=[s * size for s in record.element_strides()],
        )

    def read(self, record: TensorRecord, region: Region, coeff: bool = False) -> np.ndarray:
        """The interpreter's array of a tensor (a copy)."""
        return from_storage(self.view(record, region), record.dtype, coeff)

    def write(self, record: TensorRecord, region: Region, values: np.ndarray) -> None:
        self.view(record, region)[...] = to_storage(values, record.dtype)


def extent(record: TensorRecord) -> tuple[int, int]:
    """[lowest, highest) byte address a strided record touches."""
    size = element_bytes(record.dtype)
    if any(d == 0 for d in record.shape):
        return record.addr, record.addr
    low = high = 0
    for dim, stride in zip(record.shape, record.element_strides(), strict=True):
        span = (dim - 1) * stride
        low, high = (low + span, high) if span < 0 else (low, high + span)
    return record.addr + low * size, record.addr + (high + 1) * size
