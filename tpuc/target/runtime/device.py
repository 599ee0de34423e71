"""The simulated device's memory: one byte array per used global region,
and the NPU lanes' local memory.

Only the regions a bmodel uses (coefficients, activations) are backed by
host memory, but every address is checked against the chip's whole global
memory, so a bmodel that would not fit the real device fails here too.
Local memory is one flat byte array, lane l at [l·L, (l+1)·L); a lane
record (docs/isa.md "Memory spaces") is read and written as one strided
view per plane group (`lane_parts`), each inside its lanes.
"""

from __future__ import annotations

import numpy as np

from tpuc.base.dtypes import STORAGE, from_storage, to_storage
from tpuc.base.errors import TpucError
from tpuc.target.isa.records import (
    SPACE_GLOBAL,
    SPACE_LOCAL,
    LanePart,
    TensorRecord,
    element_bytes,
    lane_axis,
    lane_parts,
)


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
        """A local record's region after its bounds check: a plain record's
        whole extent in one lane; a lane record's every plane group inside
        [0, L) of each of its lanes."""
        try:
            axis = lane_axis(record)
        except ValueError as exc:
            raise TpucError(f"{what}: {exc}") from None
        if axis is not None and (axis >= len(record.shape) or record.element_strides()[axis] < 0):
            raise TpucError(
                f"{what}: lane axis {axis} of a {list(record.shape)} record "
                f"with strides {list(record.element_strides())}"
            )
        if axis is None:
            low, high = extent(record)
            self._check_lane(low // self.lmem_bytes if self.lmem_bytes else 0, low, high, what)
        else:
            self.lane_parts(record, what)
        return self.local()

    def _check_lane(self, lane: int, low: int, high: int, what: str) -> None:
        """[low, high) (flat local addresses) must lie in lane `lane`."""
        if not self.lmem_bytes or not 0 <= lane < self.npu_num or low < 0:
            raise TpucError(
                f"{what}: local address {low:#x} is past the {self.npu_num} NPU lanes "
                f"of {self.lmem_bytes} bytes"
            )
        begin, end = lane * self.lmem_bytes, (lane + 1) * self.lmem_bytes
        if low < begin:
            raise TpucError(f"{what}: local [{low:#x}, {high:#x}) starts before lane {lane}")
        if high > end:
            raise TpucError(
                f"{what}: local [{low:#x}, {high:#x}) runs past lane {lane}'s "
                f"{self.lmem_bytes} bytes (ends at {end:#x})"
            )

    def lane_parts(self, record: TensorRecord, what: str) -> list[LanePart]:
        """A lane record's plane groups, each checked to lie in its lanes."""
        if not self.lmem_bytes or record.addr // self.lmem_bytes >= self.npu_num:
            self._check_lane(self.npu_num, record.addr, record.addr, what)
        axis = lane_axis(record)
        low, high = in_lane_extent(record, axis)
        parts = lane_parts(record, self.npu_num, self.lmem_bytes)
        for part in parts:
            base = part.lane * self.lmem_bytes + part.offset
            self._check_lane(part.lane, base + low, base + high, what)
        return parts

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
        """A strided numpy view of a plain (not lane) record's elements (no copy)."""
        size = element_bytes(record.dtype)
        return np.ndarray(
            shape=record.shape,
            dtype=np.dtype(STORAGE[record.dtype]),
            buffer=region.bytes,
            offset=record.addr - region.start,
            strides=[s * size for s in record.element_strides()],
        )

    def views(self, record: TensorRecord, region: Region) -> list[tuple[slice, np.ndarray]]:
        """(index along the lane axis, view) per plane group of a lane record;
        one (everything, view) for any other record."""
        axis = lane_axis(record) if record.space == SPACE_LOCAL else None
        if axis is None:
            return [(slice(None), self.view(record, region))]
        size = element_bytes(record.dtype)
        strides = [s * size for s in record.element_strides()]
        strides[axis] = self.lmem_bytes
        out = []
        for part in self.lane_parts(record, "tensor"):
            shape = list(record.shape)
            shape[axis] = part.count
            array = np.ndarray(
                shape=shape,
                dtype=np.dtype(STORAGE[record.dtype]),
                buffer=region.bytes,
                offset=part.lane * self.lmem_bytes + part.offset,
                strides=strides,
            )
            out.append((slice(part.first, part.first + part.count), array))
        return out

    def get(self, record: TensorRecord, region: Region) -> np.ndarray:
        """The record's stored elements (a copy), lane records included."""
        stored = self._stored(record, region)
        return stored.copy() if stored.base is not None else stored

    def _stored(self, record: TensorRecord, region: Region) -> np.ndarray:
        """A plain record's view, or a lane record's plane groups joined (a copy)."""
        parts = self.views(record, region)
        if len(parts) == 1 and parts[0][0] == slice(None):
            return parts[0][1]
        if not parts:  # an empty lane axis
            return np.zeros(record.shape, np.dtype(STORAGE[record.dtype]))
        return np.concatenate([view for _, view in parts], axis=lane_axis(record))

    def put(self, record: TensorRecord, region: Region, stored: np.ndarray) -> None:
        """Store elements (already in the record's storage type)."""
        axis = lane_axis(record) if record.space == SPACE_LOCAL else None
        for index, view in self.views(record, region):
            where = (slice(None),) * (axis or 0) + (index,)
            view[...] = stored[where] if axis is not None else stored

    def read(self, record: TensorRecord, region: Region, coeff: bool = False) -> np.ndarray:
        """The interpreter's array of a tensor (a copy)."""
        return from_storage(self._stored(record, region), record.dtype, coeff)

    def write(self, record: TensorRecord, region: Region, values: np.ndarray) -> None:
        self.put(record, region, to_storage(values, record.dtype))


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


def in_lane_extent(record: TensorRecord, axis: int) -> tuple[int, int]:
    """[lowest, highest) byte, relative to element 0 of a plane group, that a
    lane record touches inside one lane (every axis but the lane axis)."""
    size = element_bytes(record.dtype)
    if any(d == 0 for d in record.shape):
        return 0, 0
    low = high = 0
    for k, (dim, stride) in enumerate(zip(record.shape, record.element_strides(), strict=True)):
        span = 0 if k == axis else (dim - 1) * stride
        low, high = (low + span, high) if span < 0 else (low, high + span)
    return low * size, (high + 1) * size
