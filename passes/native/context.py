"""What a native op rule works with: addresses, tensor specs, coefficients, calls.

The native target keeps tpuc's activation plan (address-assign's offsets
inside the neuron region, so buffer reuse and in-place reshapes carry over)
and moves it behind the coefficients, which start device memory laid out
the way the vendor kernels read them (the runtime takes every address at or
above the context's start for an activation, so the coefficients must come
first; their size is known once every rule ran, so codegen builds the calls
twice: once to size the coefficients, once with the final addresses). A rule turns
one TPU op into one `NativeCall`: the backend function, its parameter
struct as bytes and the operands' tensor specs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tpuc.base.dtypes import DTYPE_CODES
from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import shape_of
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.core import element_of
from tpuc.ir.module_io import module_attr
from tpuc.ir.weights import read_weight
from tpuc.passes.address_assign import address_of, align_up
from tpuc.passes.codegen.element_types import UnsupportedType, dtype_fields
from tpuc.target.vendor.params import Param, TensorSpec

GMEM_START = 0x1_0000_0000  # BM1684X: global memory, coefficients and context start here
REGION_ALIGN = 0x1000
COEFF_ALIGN = 64
# the library's DATA_TYPE_T codes are the bmodel's (tpuc.base.dtypes)
DTYPE_F32, DTYPE_I8, DTYPE_I32, DTYPE_U32 = (DTYPE_CODES[n] for n in ("f32", "i8", "i32", "u32"))
ROUND_HALF_EVEN = 3  # ROUND_MODE_T ROUND_EVEN


class NotExpressible(TpucError):
    """An op (or a form of it) the native target cannot write."""


@dataclass
class NativeCall:
    """One backend call: `function(param, sizeof, inputs, outputs, cmdid)`;
    `plain` calls take (param, sizeof, cmdid) only (TPU-MLIR's older APIs).
    `pointers` aims pointer fields of `param` at worker-side copies of bytes;
    a `move` call is one GDMA command instead, `tensor_general_move_gen_cmd`
    with these arguments, a `cw` call one `general_cwtrans_gen_cmd`
    (passes/native/gdma_permute.py)."""

    function: str
    param: bytes
    inputs: list[bytes] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)
    pointers: list[tuple[int, bytes]] = field(default_factory=list)
    plain: bool = False
    move: tuple = ()
    cw: tuple = ()


def dtype_name(value: SSAValue) -> str:
    try:
        return dtype_fields(element_of(value))["dtype"]
    except UnsupportedType as exc:
        raise NotExpressible(str(exc)) from None


def dtype_code(value: SSAValue) -> int:
    return DTYPE_CODES[dtype_name(value)]


def quant_of(value: SSAValue) -> UniformQuantizedType | None:
    element = element_of(value)
    return element if isinstance(element, UniformQuantizedType) else None


def is_float(value: SSAValue) -> bool:
    return dtype_name(value) in ("f32", "f16", "bf16")


class Coeffs:
    """The coefficient region: each array once, aligned, in order of use."""

    def __init__(self, base: int):
        self.base = base
        self.blob = bytearray()
        self.locations: list[tuple[str, int, int]] = []
        self._seen: dict[bytes, int] = {}
        self._frozen: dict[int, tuple[np.ndarray, int]] = {}  # read-only arrays by id

    def add(self, name: str, array: np.ndarray) -> int:
        """The device address of `array`'s bytes (C order) in the region (a
        read-only array added again is found without copying its bytes)."""
        frozen = self._frozen.get(id(array))
        if frozen is not None and frozen[0] is array:
            return frozen[1]
        addr = self._add(name, array)
        if isinstance(array, np.ndarray) and array.base is None and not array.flags.writeable:
            self._frozen[id(array)] = (array, addr)  # owns its bytes, which cannot change
        return addr

    def _add(self, name: str, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array).tobytes()
        known = self._seen.get(data)
        if known is not None:
            return known
        self.blob += bytes(-len(self.blob) % COEFF_ALIGN)
        addr = self.base + len(self.blob)
        self.blob += data
        self._seen[data] = addr
        self.locations.append((name, addr - self.base, len(data)))
        return addr


class NativeContext:
    """Addresses of a TPU_ADDRESSED module in the native layout."""

    def __init__(self, module: ModuleOp, coeff_size: int = 0):
        self.neuron_addr = int(module_attr(module, "neuron_addr", 0))
        self.neuron_size = int(module_attr(module, "neuron_size", 0))
        self.coeffs = Coeffs(GMEM_START)
        self.ctx_addr = GMEM_START + align_up(coeff_size, REGION_ALIGN)
        self.scratch_addr = self.ctx_addr + align_up(max(self.neuron_size, 1), COEFF_ALIGN)
        self.scratch_size = 0
        self.lane_major: set[SSAValue] = set()  # pooled vectors a group stored lane by lane

    @property
    def ctx_size(self) -> int:
        """The activations and, behind them, the scratch buffer."""
        return align_up(self.scratch_addr - self.ctx_addr + self.scratch_size, REGION_ALIGN)

    def scratch(self, nbytes: int, index: int = 0) -> int:
        """The address of scratch buffer `index` (each `nbytes` long at most)
        behind the activations, for one op's intermediate values: ops run one
        after another, so every op shares the same buffers."""
        size = align_up(nbytes, COEFF_ALIGN)
        self.scratch_size = max(self.scratch_size, size * (index + 1))
        return self.scratch_addr + size * index

    def address(self, value: SSAValue) -> int:
        """The device address of an activation (or a weight, placed on first use)."""
        owner = value.owner
        if isinstance(owner, top.WeightOp):
            array = np.asarray(read_weight(owner))
            from tpuc.base.dtypes import STORAGE

            stored = array.astype(STORAGE[dtype_name(value)])
            return self.coeffs.add(owner.names[0], stored)
        addr = address_of(value)
        if addr is None:
            raise TpucError(f"tensor '{_name(value)}' has no address (run address-assign)")
        return self.ctx_addr + addr - self.neuron_addr

    def spec(self, value: SSAValue, shape: tuple[int, ...] | None = None, addr: int | None = None
             ) -> bytes:  # fmt: skip
        """tensor_spec_t of `value` (TPU-MLIR's value_to_spec); `shape` overrides (fix_shape)."""
        real = shape_of(value)
        dims = tuple(shape if shape is not None else real or ())
        if shape is not None and real is not None and math.prod(dims) != math.prod(real):
            raise TpucError(f"tensor '{_name(value)}': cannot view {list(real)} as {list(dims)}")
        if len(dims) > 8:
            raise NotExpressible(f"tensor '{_name(value)}' has {len(dims)} dimensions (at most 8)")
        s = TensorSpec()
        s.addr = self.address(value) if addr is None else addr
        s.dtype = dtype_code(value)
        s.dims = len(dims)
        for i, d in enumerate(dims):
            s.shape[i] = d
        return s.to_bytes()

    def call(self, function: str, param: Param, op: Operation, inputs=None, outputs=None,
             **extra) -> NativeCall:  # fmt: skip
        """A spec-style call over `op`'s non-None operands and its results (or those given)."""
        if inputs is None:
            inputs = [self.spec(v) for v in op.operands if not isinstance(v.owner, top.NoneOp)]
        if outputs is None:
            outputs = [self.spec(v) for v in op.results]
        return NativeCall(function, param.to_bytes(), inputs, outputs, **extra)


def _name(value: SSAValue) -> str:
    names = getattr(value.owner, "names", None)
    return names[value.index] if names else "?"


__all__ = [
    "DTYPE_F32",
    "DTYPE_I8",
    "DTYPE_I32",
    "DTYPE_U32",
    "GMEM_START",
    "ROUND_HALF_EVEN",
    "Coeffs",
    "NativeCall",
    "NativeContext",
    "NotExpressible",
    "dtype_code",
    "dtype_name",
    "is_float",
    "quant_of",
]
