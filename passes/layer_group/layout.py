"""How a tensor sits in a chip's local memory (LMEM), from the chip data.

TPU-MLIR's default "alignEU" layout (layer-group.md §2): channel c lives on
lane c % npu_num, so each lane holds ceil(C / npu_num) channel planes per
batch item; a plane of H·W elements starts at a multiple of the EU row
(`eu_bytes / element bytes` elements), except for the "compact" operands
(conv filters and biases, per-channel coefficients), whose planes are packed.
A lane's bytes for an N,C,H,W slice are therefore
`n · ceil(c / npu) · c_stride · bytes`. Broadcast operands (LUT tables) are
copied whole to every lane. Every planner buffer is rounded up to the EU
row so that each starts EU-aligned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from tpuc.target.chips import Chip


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def nchw(shape: Sequence[int]) -> tuple[int, int, int, int]:
    """The 4-D view the planner slices: rank < 4 pads on the right (a
    [N, C] matrix is N,C,1,1), rank > 4 folds the trailing dims into W."""
    dims = [int(d) for d in shape]
    if not dims:
        return (1, 1, 1, 1)
    if len(dims) == 1:
        return (1, dims[0], 1, 1)
    dims = dims[:3] + [math.prod(dims[3:])] if len(dims) > 4 else dims
    return tuple(dims + [1] * (4 - len(dims)))  # type: ignore[return-value]


@dataclass(frozen=True)
class LocalLayout:
    """The local-memory geometry of one chip."""

    npu_num: int
    eu_bytes: int
    lmem_bytes: int  # per lane
    banks: int
    float_slices: bool = False  # float GEMM convs may slice (not bit-exact: slicing.gemm_float)

    @staticmethod
    def of(chip: Chip, float_slices: bool = False) -> LocalLayout:
        return LocalLayout(
            chip.npu_num, chip.eu_bytes, chip.lmem_bytes, chip.lmem_banks, float_slices
        )

    @cached_property
    def bank_bytes(self) -> int:
        return self.lmem_bytes // self.banks

    def eu_num(self, element_bytes: int) -> int:
        """Elements of one EU row: the alignment of a channel plane."""
        return max(1, self.eu_bytes // element_bytes)

    def lane_of(self, channel: int) -> int:
        return channel % self.npu_num

    def planes(self, channels: int) -> int:
        """Channel planes each lane holds (lane 0 holds the most)."""
        return -(-channels // self.npu_num)

    def c_stride(self, h: int, w: int, element_bytes: int, compact: bool = False) -> int:
        """Elements from one channel plane to the next on a lane."""
        return h * w if compact else align_up(h * w, self.eu_num(element_bytes))

    def lane_bytes(self, shape: Sequence[int], element_bytes: int, compact: bool = False) -> int:
        """Bytes lane 0 needs for a tensor (slice) of `shape` (any rank, see `nchw`)."""
        n, c, h, w = nchw(shape)
        return n * self.planes(c) * self.c_stride(h, w, element_bytes, compact) * element_bytes

    def channel_bytes(self, elements: int, channels: int, element_bytes: int) -> int:
        """Per-lane bytes of a compact per-channel weight (filter, bias,
        coefficients) of `elements` values spread over `channels` channels."""
        per_channel = elements // max(channels, 1)
        return self.planes(channels) * per_channel * element_bytes

    def broadcast_bytes(self, elements: int, element_bytes: int) -> int:
        """Per-lane bytes of an operand copied to every lane (LUT table)."""
        return elements * element_bytes

    def buffer_bytes(self, nbytes: int) -> int:
        """A planner buffer's size: rounded up to the EU row."""
        return align_up(max(nbytes, 1), self.eu_bytes)

    def bank_of(self, address: int) -> int:
        return address // self.bank_bytes

    def banks_of(self, address: int, size: int) -> int:
        """The banks the bytes [address, address + size) touch, as a bit mask."""
        first, last = self.bank_of(address), self.bank_of(address + max(size, 1) - 1)
        return ((1 << (last + 1)) - 1) ^ ((1 << first) - 1)


__all__ = ["LocalLayout", "align_up", "nchw"]
