"""How fast each hardware unit of a chip is: the figures the cycle model reads.

Rates are kept per *unit class* (what a part of the compute engine does),
not per opcode, so an instruction set maps onto them with one small table
(tpuc/target/isa/units.py today). Every figure names its source; `[assumed]` marks
a value chosen because no public figure was found.

Unit of the published rates. TPU-MLIR's profiler
(python/profile_helper/bmprofile_generator.py, bm1684x_defs.py; digest in
shared/reference/layer-group.md §9) gives peak rates as
`"TOPS" = k · f_MHz / 1000`, where one "TOPS" is 1024·10⁹ ops/s. At f MHz a
cycle lasts 1/(f·10⁶) s, so ops per cycle = k · 1024·10⁹ · (f/1000) /
(f·10⁶) = 1024·k, whatever the clock. A multiply-accumulate counts 2 ops
(the convention behind "TOPS" and tpuc.ir.flops), so conv/matmul do 512·k MACs
per cycle; pooling, elementwise, conversion and LUT count 1 op per element
(per window element for pooling and depthwise convolution).

Element width picks the column: 1 byte (int8/uint8), 2 bytes (f16, bf16,
i16), 4 bytes (f32, i32). For elementwise work the published k (4/2/1) is
exactly lanes × EU elements per lane (64 × 64/bytes) / 1024, which is how
the smaller chips' rates below are derived.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction


class Unit(StrEnum):
    """Hardware unit classes of the compute engine (TIU) plus the DMA engine."""

    CONV = "conv"  # convolution cube: MACs
    MATMUL = "matmul"  # matrix multiply (FC, batched matmul, RNN gates): MACs
    POOL = "pool"  # max pooling, reduce, resize: window elements
    AVGPOOL = "avgpool"  # average pooling: window elements
    DEPTHWISE = "depthwise"  # depthwise convolution (the pool unit's window MACs): MACs
    ARITH = "arith"  # elementwise arithmetic, compare, select, data arrangement: elements
    RESCALE = "rescale"  # int8 add/sub with a multiplier per input (requant each, then add)
    LUT = "lut"  # table lookup: elements
    CONVERT = "convert"  # dtype conversion, requantization: elements
    SFU = "sfu"  # special functions (exp, sigmoid, division): elements
    NORM = "norm"  # softmax and normalizations (a kernel of SFU passes): elements
    DMA = "dma"  # GDMA moves: bytes


class Direction(StrEnum):
    """Where a GDMA move reads and writes."""

    DDR_TO_LMEM = "ddr_to_lmem"
    LMEM_TO_DDR = "lmem_to_ddr"
    DDR_TO_DDR = "ddr_to_ddr"
    LMEM_TO_LMEM = "lmem_to_lmem"


GiB = 1 << 30


def ops_per_cycle(k: float) -> Fraction:
    """A profiler rate k ("TOPS" at 1 GHz, unit 1024·10⁹ ops/s) in ops per cycle."""
    return Fraction(k) * 1024


def bytes_per_cycle(gib_per_s: float, clock_mhz: int) -> Fraction:
    """A bandwidth in GiB/s as bytes per GDMA cycle at `clock_mhz`."""
    return Fraction(gib_per_s) * GiB / (clock_mhz * 10**6)


@dataclass(frozen=True)
class Timing:
    """One chip's cycle-model figures."""

    clock_mhz: int  # TIU and GDMA clock (one clock for both here)
    tiu_issue_cycles: int  # fixed cost of every TIU command (fetch, decode, pipeline fill)
    gdma_latency_cycles: int  # fixed cost of every GDMA command (DDR round trip, descriptor)
    ops: Mapping[Unit, Mapping[int, Fraction]]  # unit -> element bytes -> ops per cycle
    sfu_ops_per_element: int  # arith ops one special-function element costs
    dma: Mapping[Direction, Fraction]  # bytes per cycle
    source: str  # one line: where the figures come from
    lanes: int = 64  # NPU lanes: a conv's output channels are padded to a multiple
    ic_chunk: Mapping[int, int] = field(default_factory=dict)  # element bytes -> conv IC step
    overhead: Mapping[Unit, int] = field(default_factory=dict)  # extra cycles per command
    dma_burst_cycles: Mapping[Direction, Fraction] = field(default_factory=dict)  # least
    # cycles of one row burst of a strided move, per direction
    dma_element_cycles: Fraction = Fraction(0)  # per element of a transposing move
    row_cycles: Mapping[int, int] = field(default_factory=dict)  # bytes -> per matmul out row
    dma_shuffle_cycles: Fraction = Fraction(0)  # per element of a transpose within lanes
    widened: frozenset[Unit] = frozenset()  # 16-bit kernels run in f32 between casts

    def rate(self, unit: Unit, element_bytes: int) -> Fraction:
        """Ops per cycle of `unit` on elements of `element_bytes` (wider: 4)."""
        column = self.ops[unit]
        width = min((w for w in column if w >= element_bytes), default=max(column))
        return column[width]


def _by_width(k8: float, k16: float, k32: float) -> dict[int, Fraction]:
    return {1: ops_per_cycle(k8), 2: ops_per_cycle(k16), 4: ops_per_cycle(k32)}


# BM1684X: rates k from TPU-MLIR's bm1684x profiler defs (layer-group.md §9),
# then fitted ("fit") to the vendor backend library's cycles for the single-op
# suite of benchmarks/cycle_fit.py (2026-11-27; its measured figures are in
# tpuc/target/chips/bm1684x_cycle_suite.json, the errors before and after in
# docs/cost.md "Calibration").
_BM1684X_K = {
    Unit.CONV: (32, 16, 2),  # conv/matmul "TOPS": int8, f16/bf16, f32
    Unit.MATMUL: (32, 16, 0.2),  # same cube; fit: f32 (the vendor's fc kernel) far slower
    Unit.POOL: (8, 4, 2),  # "pool/fc" row
    Unit.AVGPOOL: (8, 4, 2),  # "pool/fc" row; 16-bit runs in f32 (widened, below)
    Unit.DEPTHWISE: (0.31, 0.025, 0.2),  # fit: far below the pool row (16-bit slowest)
    Unit.ARITH: (4, 2, 1),  # "other elementwise" = 64 lanes x EU elements (64/bytes)
    Unit.RESCALE: (2.7 / 1024,) * 3,  # fit: int8 add with input multipliers
    Unit.CONVERT: (4, 2, 1),  # [assumed] conversions run on the elementwise path
    Unit.SFU: (4, 2, 1),  # elementwise rate, divided by sfu_ops_per_element
    Unit.NORM: (4, 2, 0.9),  # fit: sfu's rate (f32: 0.9), a fixed cost; 16-bit runs in f32
    Unit.LUT: (128 / 1024,) * 3,  # fit ("lut: 64/1024" published: 64 per cycle)
}
_CLOCK_1684X = 1000  # MHz, TIU and GDMA default in bmprofile_generator.py

BM1684X = Timing(
    clock_mhz=_CLOCK_1684X,
    tiu_issue_cycles=64,  # [assumed] no published figure; a few dozen cycles per command
    gdma_latency_cycles=200,  # fit (was 400 [assumed]): small moves' fixed cost
    ops={unit: _by_width(*k) for unit, k in _BM1684X_K.items()},
    sfu_ops_per_element=16,  # [assumed] exp/sigmoid/… as ~16-term polynomial sequences
    dma={
        Direction.DDR_TO_LMEM: bytes_per_cycle(58, _CLOCK_1684X),  # bm1684x_defs.py
        Direction.LMEM_TO_DDR: bytes_per_cycle(44, _CLOCK_1684X),  # bm1684x_defs.py
        Direction.DDR_TO_DDR: bytes_per_cycle(28, _CLOCK_1684X),  # bm1684x_defs.py
        Direction.LMEM_TO_LMEM: bytes_per_cycle(58, _CLOCK_1684X),  # [assumed] = DDR->LMEM
    },
    source="TPU-MLIR bm1684x profiler defs, fitted to the vendor's cycles (cycle_fit.py)",
    lanes=64,
    ic_chunk={1: 64, 2: 32, 4: 1},  # fit: a conv's input channels in steps of 64/32/1
    # fit: softmax's fixed kernel cost; the INT8 add's: the vendor kernel requantizes each
    # input to 16 bits through DDR (six more GDMA moves, ~3k cycles at any size)
    overhead={Unit.NORM: 370, Unit.RESCALE: 3000},
    dma_burst_cycles={
        Direction.DDR_TO_DDR: Fraction(98, 10),  # fit: a strided slice ~9.8 cycles per row
        Direction.DDR_TO_LMEM: Fraction(98, 10),  # [assumed] as DDR->DDR
        Direction.LMEM_TO_LMEM: Fraction(98, 10),  # [assumed] as DDR->DDR
        # fit: the vendor's global pooling stores one row per channel, 25 cycles each
        # (1x1 maps: 64 channels 1.6k, 256 channels 6.4k cycles); a stored row
        # narrower than 128 bytes costs one (tpuc/target/isa/units.py NARROW_ROW_BYTES)
        Direction.LMEM_TO_DDR: Fraction(25),
    },
    dma_element_cycles=Fraction(9, 100),  # fit: a permute ~0.09 cycles per element
    # fit: the vendor's fc call costs per row of its result (M) beyond its MACs:
    # 64x256x256 and 256x64x64 take 3.3k/4.4k (int8), 4.3k/3.5k (f16),
    # 49k/28k (f32) cycles: 256 rows of 64 cost more than 64 rows of 256
    row_cycles={1: 12, 2: 6, 4: 60},
    # fit: a permute within each channel's map (the vendor: load, a TIU transpose,
    # store: 0.03-0.06 cycles per element on the TIU) costs far less than one
    # across lanes (dma_element_cycles)
    dma_shuffle_cycles=Fraction(5, 100),
    # the native target computes 16-bit softmax and average pooling in f32 between
    # casts (passes/native/softmax.py, pool.py half_via_f32): priced so (cycles.widened)
    widened=frozenset({Unit.AVGPOOL, Unit.NORM}),
)


def scaled(base: Timing, lanes: Fraction, eu: Fraction, clock_mhz: int, dma_gib, source: str):
    """A smaller chip's timing from `base`'s: compute rates scaled by the
    ratio of lanes × EU bytes (the elementwise rows are exactly lanes × EU;
    the cube and pool units are assumed to scale alike), the LUT by lanes
    alone (one lookup per lane per cycle); its own clock and bandwidths; the
    fitted fixed costs and steps of `base` [assumed] alike."""
    ops = {u: {w: r * lanes * eu for w, r in col.items()} for u, col in base.ops.items()}
    ops[Unit.LUT] = {w: r * lanes for w, r in base.ops[Unit.LUT].items()}
    return replace(
        base,
        clock_mhz=clock_mhz,
        ops=ops,
        dma={d: bytes_per_cycle(g, clock_mhz) for d, g in dma_gib.items()},
        source=source,
        lanes=int(base.lanes * lanes),
    )


# BM1688: 32 lanes x 16 B EU (= 1/8 of bm1684x's 64 x 64); TIU 900 MHz and
# GDMA s2s/s2l/l2s/l2l 12/24/24/12 GB/s from BM1688.h (set_simulation_freq),
# GB read as GiB here. Compute rates [assumed] scaled from bm1684x.
BM1688 = scaled(
    BM1684X,
    Fraction(32, 64),
    Fraction(16, 64),
    900,
    {
        Direction.DDR_TO_DDR: 12,
        Direction.DDR_TO_LMEM: 24,
        Direction.LMEM_TO_DDR: 24,
        Direction.LMEM_TO_LMEM: 12,
    },
    "BM1688.h clock and bandwidths; rates scaled from bm1684x by lanes x EU [assumed]",
)

# CV183x: 32 lanes x 16 B EU (tpuc/target/chips, from TPU-MLIR's cv18xx headers).
# No CV18xx cycle figures were read (CV18xx_profiling.cpp has a model, not
# digested): clock 650 MHz and DMA bandwidths [assumed], rates scaled.
_CV18XX_DMA = {
    Direction.DDR_TO_LMEM: 8,
    Direction.LMEM_TO_DDR: 8,
    Direction.DDR_TO_DDR: 4,
    Direction.LMEM_TO_LMEM: 8,
}
CV183X = scaled(
    BM1684X,
    Fraction(32, 64),
    Fraction(16, 64),
    650,
    _CV18XX_DMA,
    "[assumed] scaled from bm1684x by lanes x EU; 650 MHz and 8/8/4 GiB/s assumed",
)
# CV182x: 8 lanes x 16 B EU; same assumptions as cv183x.
CV182X = scaled(
    BM1684X,
    Fraction(8, 64),
    Fraction(16, 64),
    650,
    _CV18XX_DMA,
    "[assumed] scaled from bm1684x by lanes x EU; 650 MHz and 8/8/4 GiB/s assumed",
)
