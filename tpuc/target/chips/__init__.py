"""Chips as data: what each target supports and how it quantizes.

Passes never branch on a chip's name; they read these fields. Adding a chip
means adding a `Chip` here and, only where its arithmetic differs, a
lowering rule registered for it (see passes/lowering/registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpuc.base.errors import TpucError
from tpuc.target.chips import timing

FLOAT_MODES = ("F32", "F16", "BF16")
MODES = (*FLOAT_MODES, "INT8")
CPU_OPS = ("tpu.TopK",)
"""TPU ops no chip runs yet: subnet-divide puts them in CPU subnets."""


@dataclass(frozen=True)
class Chip:
    """One target. Memory sizes are those of the BM168x backend headers."""

    name: str
    family: str  # lowering rules may be registered per family ("bm168x", "cv18xx")
    modes: tuple[str, ...]  # quantize modes it runs
    npu_num: int
    eu_bytes: int
    lmem_bytes: int  # local memory per NPU
    lmem_banks: int
    gmem_align: int  # alignment of each weight in global memory
    gmem_start: int  # first global-memory byte the compiler may use
    gmem_bytes: int  # size of the (simulated) global memory
    neuron_align: int  # alignment of each activation in global memory
    cpu_ops: tuple[str, ...]  # TPU op names the chip cannot run: CPU subnets
    asymmetric: bool  # INT8 with zero points
    multiplier_bits: int  # width of the conv/matmul requant multiplier (signed)
    eltwise_multiplier_bits: int  # width of add/sub/concat input multipliers
    eltwise_term_rshift: bool  # INT8 add/sub round each input's term by its own rshift
    round_mode: str  # requant rounding of the chip
    float_fallback: str  # float mode for ops without an accurate INT8 form
    float_epilogue: bool  # INT8 conv/matmul may dequantize its int32 result to float
    timing: timing.Timing = field(compare=False)  # unit rates, clock, DMA bandwidths (cycle model)

    def check_mode(self, mode: str) -> None:
        """Fail, naming what the chip supports, when it cannot run `mode`."""
        if mode not in MODES:
            raise TpucError(f"unknown quantize mode '{mode}' (known: {', '.join(MODES)})")
        if mode not in self.modes:
            raise TpucError(
                f"chip {self.name} does not support {mode} (it supports {', '.join(self.modes)})"
            )


_BM168X = dict(
    family="bm168x",
    asymmetric=True,
    multiplier_bits=32,
    eltwise_multiplier_bits=16,
    eltwise_term_rshift=True,  # bcbinary ADD/SUB: u8 scale and rshift per input
    round_mode="HalfAwayFromZero",
    float_fallback="F32",
    float_epilogue=True,
    gmem_align=4096,
    gmem_start=0x100000000,  # TPU-MLIR's CTX_START_ADDR
    gmem_bytes=4 * 2**30,
    neuron_align=64,
    cpu_ops=CPU_OPS,
    lmem_banks=16,
)
_CV18XX = dict(
    family="cv18xx",
    modes=("BF16", "INT8"),
    asymmetric=False,
    multiplier_bits=8,
    eltwise_multiplier_bits=8,
    eltwise_term_rshift=False,  # one rshift on Σ q_i·M_i (TPU-MLIR's cv18xx Add)
    round_mode="HalfAwayFromZero",
    float_fallback="BF16",
    float_epilogue=False,
    gmem_align=16,
    gmem_start=0,
    neuron_align=16,
    cpu_ops=CPU_OPS,
    lmem_banks=8,
)

CHIPS: dict[str, Chip] = {
    chip.name: chip
    for chip in (
        Chip(
            "bm1684x",
            modes=MODES,
            npu_num=64,
            eu_bytes=64,
            lmem_bytes=256 * 1024,
            timing=timing.BM1684X,
            **_BM168X,
        ),
        Chip(
            "bm1688",
            modes=MODES,
            npu_num=32,
            eu_bytes=16,
            lmem_bytes=128 * 1024,
            timing=timing.BM1688,
            **_BM168X,
        ),
        Chip(
            "cv183x",
            npu_num=32,
            eu_bytes=16,
            lmem_bytes=32 * 1024,
            gmem_bytes=2**30,
            timing=timing.CV183X,
            **_CV18XX,
        ),
        Chip(
            "cv182x",
            npu_num=8,
            eu_bytes=16,
            lmem_bytes=32 * 1024,
            gmem_bytes=2**28,
            timing=timing.CV182X,
            **_CV18XX,
        ),
    )
}


def get_chip(name: str) -> Chip:
    """The chip called `name` (case-insensitive), or a one-line error."""
    chip = CHIPS.get(name.lower())
    if chip is None:
        raise TpucError(f"unknown chip '{name}' (known: {', '.join(CHIPS)})")
    return chip
