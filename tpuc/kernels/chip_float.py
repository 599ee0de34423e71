"""BM168x float32 arithmetic as the chip computes it, bit for bit.

The vendor backend builds exp, log, division and reductions out of TIU
commands that each round to nearest even and flush subnormal results to
zero; the vendor's chip model (the "cmodel" its runtime runs) executes them
as read from the backend's command streams (bmodel_dis) and the cmodel's
code, and checked on millions of values in the vendor runtime:

- exp(x): x clamped to ±3.4028e35; n = floor(x·f32(log2 e)); r = x − n·f32(ln 2);
  p = Horner over 1/k! for k = 9..0 (f32 coefficients, a multiply then an
  add per step); result p · 2^n with n clamped to [−127, 127] and 2^n built
  in the exponent bits (2^−127 is 0).
- log(x): x = m·2^e with m in [2/3, 4/3) (the mantissa halved above
  0x2AAAAB); 16 Taylor terms of log(1 + t), t = m − 1, by Horner; plus
  e·f32(ln 2).
- a / b: y = the bit-trick seed 0x5f3759df − (|b|_bits >> 1), then three
  Newton steps y·(1.5 − (y·(|b|·0.5))·y) (rsqrt of |b|); result (y·y)·|a|
  with the sign of a·b. `sfu.rsqrt` is the same rsqrt with its own steps.
- sigmoid(x): 1 / (exp(−x) + 1); tanh(x): 1 − 2 / (exp(min(x + x, 100)) + 1),
  by the chip's exp and divide (`arith.div`); GELU as ((erf(x/√2) + 1)·0.5)·x
  with Numerical Recipes' erfcc (also Erf), its tanh form by the chip's
  tanh; Exp is the chip's exp; HardSwish (x·min(max(x + 3, 0), 6))·f32(1/6);
  Softplus log(max(exp(x) + 1, 2^−126)); Mish x − 2x / ((e + 1)² + 1) with
  e = exp(x) clamped (the compares order NaN by its sign bit).
- f32 Add, Sub, Mul, Max and Min flush subnormal operands and results to
  zero (`fold`, `binary`; a kernel for f32 results only).
- an f32 average-pooling window: each element times the scale, even
  positions summed into one accumulator and odd into another, in order,
  then the two added (no flush to zero there).

On these: `softmax`, `lrn`, `layer_norm`, `avg_pool` and `unary` (the
activations in CHIP_UNARY), the vendor's f32 kernels for those ops (the
reduction layouts as the backend lays them out); a depthwise convolution
is `chip_depthwise`'s (the same two accumulators over the kernel positions).
`chip_kernel` maps a kernel-library function to the chip family's own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from tpuc.kernels import (
    activation,
    cast,
    chip_cast,
    chip_depthwise,
    elementwise,
    float_conv,
    norm,
    pooling,
)
from tpuc.kernels.arrays import Array, axis_of
from tpuc.kernels.pool_window import padded_input

F = np.float32
TINY = F(2.0**-126)  # smallest normal f32: smaller results flush to zero
CLAMP = F(3.4028198694267105e35)
LOG2E = F(1.4426950216293335)
LN2 = F(0.6931471824645996)
EXP_COEFFS = np.array([1 / math.factorial(k) for k in range(10)], F)  # 1/k!, k = 0..9
LOG_COEFFS = np.array([0.0] + [(-1) ** (k + 1) / k for k in range(1, 16)], F)  # log(1+t)
LOG_SPLIT = 0x2AAAAB  # mantissa bits above which log's argument is halved (cmodel microop_normal)
NEWTON_STEPS = 3  # `arith.div` with iter = 3
ERFC_COEFFS = np.array([
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
], F)  # fmt: skip
"""Numerical Recipes' erfcc polynomial in t, lowest power first."""
TANH_MAX = 100.0  # tanh clamps 2x to this before its exp
RSQRT_STEPS = 4  # `sfu.rsqrt` with rsqrt_n = 4 (LayerNorm)
COLUMNS = 16  # f32 lanes of a row: the first-stage width of the backend's sums
TWO_STAGE_MAX = 4096  # an innermost axis up to this long is summed in two stages
LANES = 64  # bm168x NPUs: a local tensor's channels over them
LOCAL_ROW_MAX = 8192
"""f32 elements of softmax rows a lane holds at most in a local softmax of
a row longer than TWO_STAGE_MAX (its f32 input, result and the kernel's two
work copies, and an f16/bf16 slice's casts: ~20 bytes an element, within
the 256 KiB of a lane)."""


def ftz(x: Array) -> Array:
    """Subnormal results flushed to (signed) zero, as every TIU float op does."""
    return np.where(np.abs(x) < TINY, x * F(0), x)


def exp(x: Array) -> Array:
    """The chip's f32 exp (module docstring)."""
    x = np.clip(np.asarray(x, F), -CLAMP, CLAMP)
    n = np.floor(x * LOG2E)
    r = x - n * LN2
    biased = np.asarray(
        np.clip(n, -127, 127) + 127, np.int32
    )  # int32 under numpy 1's promotion too
    power = (biased << np.int32(23)).view(F)
    return horner(r, EXP_COEFFS) * power


def horner(t: Array, coeffs: Array) -> Array:
    """Σ coeffs[k]·t^k as `sfu.taylor`: from the last coefficient, a multiply
    then an add per step."""
    p = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        p *= t
        p += c
    return p


def log(x: Array) -> Array:
    """The chip's f32 natural log (LRN's power): x = m·2^e with m in
    [2/3, 4/3), log(1 + (m − 1)) by 16 Taylor terms, plus e·f32(ln 2)."""
    x = np.maximum(np.asarray(x, F), TINY)
    raw = x.view(np.int32)
    e = ((raw >> 23) & 0xFF) + ((raw & 0x7FFFFF) > LOG_SPLIT)
    t = x * ((254 - e) << 23).astype(np.int32).view(F) - F(1)
    p = horner(t, LOG_COEFFS)
    p = np.where(x == np.inf, F(np.inf), p)
    return p + (e - 127).astype(F) * LN2


def rsqrt(x: Array, steps: int = NEWTON_STEPS) -> Array:
    """1/sqrt(x) for x >= 0: the bit-trick seed and `steps` Newton steps."""
    x = np.asarray(x, F)
    half = x * F(0.5)
    y = (np.uint32(0x5F3759DF) - (x.view(np.uint32) >> np.uint32(1))).view(F)
    for _ in range(steps):
        y = y * (F(1.5) - (y * half) * y)
    return y


def divide(a: Array, b: Array, steps: int = NEWTON_STEPS) -> Array:
    """a / b as `arith.div`: rsqrt(|b|)² · |a|, with the sign of a·b."""
    a, b = np.asarray(a, F), np.asarray(b, F)
    sign = (a.view(np.uint32) ^ b.view(np.uint32)) & np.uint32(0x80000000)
    magnitude = (a.view(np.uint32) & np.uint32(0x7FFFFFFF)) | sign
    y = rsqrt((b.view(np.uint32) & np.uint32(0x7FFFFFFF)).view(F), steps)
    return ftz((y * y) * magnitude.view(F))


def sigmoid(x: Array) -> Array:
    """The vendor's f32 sigmoid (`backend_api_active_global`, SIGMOID):
    1 / (exp(−x) + 1) by the chip's exp and divide."""
    x = np.asarray(x, F)
    return divide(np.ones_like(x), exp(-x) + F(1))


def tanh(x: Array) -> Array:
    """The vendor's f32 tanh (TANH active): 1 − 2 / (exp(min(x + x, 100)) + 1)."""
    x = np.asarray(x, F)
    return F(1) - divide(np.full_like(x, 2), exp(np.minimum(x + x, F(TANH_MAX))) + F(1))


def gelu_tanh(x: Array) -> Array:
    """The vendor's f32 tanh GELU (TGELU): u = ((0.044715·x)·x)·x + x,
    ((tanh(u·f32(√(2/π))) + 1)·0.5)·x by the chip's tanh."""
    x = np.asarray(x, F)
    u = ((x * F(0.044715)) * x) * x + x
    return ftz(((tanh(u * F(math.sqrt(2 / math.pi))) + F(1)) * F(0.5)) * x)


def erf(x: Array) -> Array:
    """The chip's erf (GELU's): Numerical Recipes' erfcc, z = |x|,
    t = 1 / (z·0.5 + 1), erfc = exp(P(t) − x·x) · t with P by `sfu.taylor`,
    then (1 − erfc) times the sign of x: 1 above 0, 0 at +0, else −1 (−0 and
    positive subnormals too, as the chip's compares give it)."""
    x = np.asarray(x, F)
    t = divide(np.ones_like(x), np.abs(x) * F(0.5) + F(1))
    erfc = exp(horner(t, ERFC_COEFFS) - x * x) * t
    sign = np.where(ftz(x) > 0, F(1), F(-1))  # `cmp.sel_gt`: a subnormal x is 0
    sign[x.view(np.uint32) == 0] = 0  # `cmp.sel_eq` on the bits: −0 is not 0
    return (F(1) - erfc) * sign


def gelu(x: Array) -> Array:
    """The vendor's f32 GELU (GELU active): ((erf(x·f32(1/√2)) + 1)·0.5)·x."""
    x = np.asarray(x, F)
    return ftz(((erf(x * F(1 / math.sqrt(2))) + F(1)) * F(0.5)) * x)


def hard_swish(x: Array) -> Array:
    """The vendor's f32 HardSwish (HSWISH active): (x · min(max(x + 3, 0), 6)) · f32(1/6)."""
    x = np.asarray(x, F)
    return ftz(ftz(x * np.minimum(np.maximum(x + F(3), F(0)), F(6))) * F(1 / 6))


def order_key(x: Array) -> Array:
    """The chip's float compare (max, min, `cmp.sel_*`) orders by sign and
    magnitude bits: a NaN sorts past ±inf by its sign (the exp's NaN,
    0xFFC00000, below everything), where numpy's compares are false."""
    bits = np.asarray(x, F).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def softplus(x: Array) -> Array:
    """The vendor's f32 Softplus (SOFT_PLUS active): log(max(exp(x) + 1,
    2^−126)) by the chip's exp and log (a NaN exp gives log(2^−126))."""
    x = np.asarray(x, F)
    y = exp(x) + F(1)
    return log(np.where(order_key(y) > order_key(TINY), y, TINY))


MISH_MAX = F(1.844670009324444e19)  # 0x5F7FFFD8: (e + 1)² stays finite
MISH_MIN = F(1.0841999752870023e-19)  # 0x1FFFFFDE


def mish(x: Array) -> Array:
    """The vendor's f32 Mish (MISH active): e = exp(x) clamped to
    [MISH_MIN, MISH_MAX] by the chip's compares (a NaN goes to MISH_MIN),
    then x − 2·(x / ((e + 1)² + 1)) by the chip's divide, every operand and
    result flushed (x·tanh(softplus(x)) = x − 2x / ((1 + e^x)² + 1))."""
    x = np.asarray(x, F)
    e = exp(x)
    e = np.where(order_key(e) > order_key(MISH_MAX), MISH_MAX, e)
    e = np.where(order_key(e) < order_key(MISH_MIN), MISH_MIN, e)
    t = e + F(1)
    return ftz(ftz(x) + divide(x, t * t + F(1)) * F(-2))


# --- f32 elementwise: operands and results flushed ------------------------------------------

FLUSHED_BINARY = ("Sub",)  # elementwise.binary kinds measured to flush (Div, Pow: the library's)


def fold(p: elementwise.Fold, *args: Array) -> Array:
    """f32 Add/Mul/Max/Min as the chip's TIU computes them: subnormal
    operands and results flushed to (signed) zero (a product of normal
    values below 2^−126 is 0; 3·2^−127 is 0·3)."""
    return ftz(elementwise.fold(p, *(ftz(np.asarray(a, F)) for a in args)))


def binary(p: elementwise.Binary, a: Array, b: Array) -> Array:
    """f32 Sub flushed as `fold`; Div and Pow are the library's."""
    if p.kind not in FLUSHED_BINARY:
        return elementwise.binary(p, a, b)
    return ftz(elementwise.binary(p, ftz(np.asarray(a, F)), ftz(np.asarray(b, F))))


def window_sum(x: Array, axis: int, scale: float = 1.0) -> Array:
    """An f32 average-pooling window along `axis` (kept, size 1): scaled
    elements, even and odd positions in two running sums, then added."""
    x = np.moveaxis(np.asarray(x, F), axis, -1)
    if scale != 1.0:
        x = x * F(scale)
    total = np.zeros(x.shape[:-1], F)
    for part in (x[..., 0::2], x[..., 1::2]):
        if part.shape[-1]:
            total = total + np.cumsum(part, axis=-1, dtype=F)[..., -1]
    return np.expand_dims(total, axis)


def column_sum(x: Array, scale: float = 1.0) -> Array:
    """A sum over the last axis laid out in rows of COLUMNS (zero-padded):
    each column summed down its rows, then the columns summed across, each
    column sum times `scale` (the last axis kept, size 1)."""
    length = x.shape[-1]
    rows = -(-length // COLUMNS)
    padded = np.zeros(x.shape[:-1] + (rows * COLUMNS,), F)
    padded[..., :length] = x
    columns = window_sum(padded.reshape(x.shape[:-1] + (rows, COLUMNS)), -2)
    return window_sum(columns[..., 0, :], -1, scale)


def two_stage(shape: tuple[int, ...], axis: int) -> bool:
    """Whether the chip's softmax over `axis` (innermost) of `shape` sums in
    two stages (`column_sum`): the global kernel does so up to TWO_STAGE_MAX;
    the local one at any length, and the native target runs a longer row
    of a [1, C, L] tensor as a local softmax (a layer group of its own when
    no other holds it, passes/native/softmax.py) while each lane's rows,
    ceil(C/64)·L, stay within LOCAL_ROW_MAX."""
    length = shape[axis]
    if length <= TWO_STAGE_MAX:
        return True
    lead = shape[:axis]
    return len(lead) == 2 and lead[0] == 1 and -(-lead[1] // LANES) * length <= LOCAL_ROW_MAX


def axis_sum(x: Array, axis: int) -> Array:
    """The softmax sum over `axis` (kept) in the backend's layout: an
    innermost axis summed in two stages (`two_stage`) in rows of COLUMNS
    (zero-padded), down each column then across; anything else in one
    window."""
    if axis != x.ndim - 1 or not two_stage(x.shape, axis):
        return window_sum(x, axis)
    return column_sum(x)


def softmax(p: norm.Softmax, x: Array) -> Array:
    """`backend_api_softmax_global` in f32: e = exp(x − max), e · (1 / Σe).
    A log-softmax keeps the kernel library's form."""
    if p.log:
        return norm.softmax(p, x)
    x = np.asarray(x, F)
    axis = axis_of(p.axis, x.ndim)
    inner = x.shape[axis + 1 :]
    flat = x.reshape(x.shape[: axis + 1] + (-1,)) if inner else x
    if flat.ndim > axis + 1 and flat.shape[-1] == 1:  # trailing ones: the axis is innermost
        flat = flat[..., 0]
    e = exp(ftz(flat - flat.max(axis=axis, keepdims=True)))
    total = axis_sum(e, axis)
    return ftz(divide(np.ones_like(total), total) * e).reshape(x.shape)


def lrn(p: norm.LRN, x: Array) -> Array:
    """The vendor's f32 LRN: squares summed over the channel window as
    s[c] + s[c+1] + s[c−1] + s[c+2] + s[c−2] + …, d = Σ·f32(α/size) + bias,
    x · exp(−β · log d)."""
    x = np.asarray(x, F)
    s = x * x
    total = s.copy()
    channels = x.shape[1]
    before, after = (p.size - 1) // 2, p.size // 2
    for k in range(1, max(before, after) + 1):
        if k <= after:
            total[:, : channels - k] += s[:, k:]
        if k <= before:
            total[:, k:] += s[:, : channels - k]
    d = total * F(p.alpha / p.size) + F(p.bias)
    return ftz(exp(log(d) * F(-p.beta)) * x)


def layer_norm(p: norm.LayerNorm, x: Array, weight: Array | None, bias: Array | None) -> Array:
    """The vendor's f32 LayerNorm over the axes from `p.axis` on (n values):
    mean = one window of x·f32(1/n); c = x − mean; var = column_sum(c², 1/n);
    c · rsqrt(var + eps) (4 Newton steps, inf -> 0), then · weight, + bias."""
    x = np.asarray(x, F)
    axis = axis_of(p.axis, x.ndim)
    flat = x.reshape(x.shape[:axis] + (-1,))
    inverse = float(F(1.0 / flat.shape[-1]))
    centered = ftz(flat - window_sum(flat, -1, inverse))
    var = column_sum(ftz(centered * centered), inverse)
    scale = rsqrt(var + F(p.eps), RSQRT_STEPS)
    scale[np.isinf(scale)] = 0
    y = ftz(scale * centered).reshape(x.shape)
    if weight is not None:
        y = ftz(np.asarray(weight, F) * y)
    if bias is not None:
        y = ftz(np.asarray(bias, F) + y)
    return y


def avg_pool(p: pooling.Pooling, x: Array) -> Array:
    """The vendor's f32 average pooling (2-D): a global one as column_sum of
    the plane times 1/n; else each window (padding included, row-major)
    a window_sum of x·f32(1/(kh·kw)), then, without count_include_pad, the
    rows whose windows reach into the padding times f32(kh/valid rows), then
    such columns times f32(kw/valid columns)."""
    g = p.geometry(x)
    if len(g.kernel) != 2:  # the native target pools in 2-D only
        return pooling.avg_pool(p, x)
    x = np.asarray(x, F)
    lead = x.shape[: x.ndim - len(g.kernel)]
    if g.is_global():
        y = column_sum(x.reshape(*lead, -1), 1.0 / int(np.prod(g.kernel)))
        return pooling.fused_relu(p, y.reshape(*lead, 1, 1))
    (kh, kw), (sh, sw), (oh, ow) = g.kernel, g.strides, g.out
    windows = np.lib.stride_tricks.sliding_window_view(padded_input(x, g, 0.0), (kh, kw), (-2, -1))
    windows = windows[..., : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw, :, :]
    y = window_sum(windows.reshape(*lead, oh, ow, kh * kw), -1, 1.0 / (kh * kw))[..., 0]
    if not p.count_include_pad:
        for axis, (k, count) in enumerate(zip(g.kernel, _axis_counts(g), strict=True)):
            edge = count < k
            if edge.any():
                index = (slice(None),) * (len(lead) + axis) + (np.nonzero(edge)[0],)
                factor = (k / count[edge]).astype(F)
                y[index] = ftz(y[index] * factor.reshape((-1,) + (1,) * (1 - axis)))
    return pooling.fused_relu(p, y)


def _axis_counts(g) -> list[Array]:
    """Per spatial axis: how many input rows (columns) each window covers."""
    counts = []
    for i, k in enumerate(g.kernel):
        start = np.arange(g.out[i]) * g.strides[i] - g.begins[i]
        counts.append(np.minimum(start + k, g.sizes[i]) - np.maximum(start, 0))
    return counts


CHIP_UNARY: dict[str, Callable[[activation.Unary, Array], Array]] = {
    "Sigmoid": lambda p, x: sigmoid(x),
    "Tanh": lambda p, x: tanh(x),
    "Exp": lambda p, x: exp(x),
    "Erf": lambda p, x: erf(x),
    "HardSwish": lambda p, x: hard_swish(x),
    "Mish": lambda p, x: mish(x),
    "Softplus": lambda p, x: softplus(x),
    "GELU": lambda p, x: GELU_FORMS[p.option](x),
}
"""`Unary` kinds the chip computes its own way (with default parameters)."""
GELU_FORMS = {"": gelu, "normal": gelu, "none": gelu, "tanh": gelu_tanh}
"""GELU's approx_mode -> the chip's form (QGELU's "sigmoid" keeps the library's)."""


def unary(p: activation.Unary, x: Array, *rest: Array | None) -> Array:
    """The chip's form of the activation `p` (CHIP_UNARY), else the kernel
    library's; a scaled, biased or log form keeps the library's (the native
    target lowers those otherwise or not at all)."""
    own = CHIP_UNARY.get(p.kind)
    option = p.kind == "GELU" and p.option in GELU_FORMS
    plain = p.alpha in (None, 1.0) and p.beta in (None, 0.0) and (option or not p.option)
    if own is None or not plain:
        return activation.unary(p, x, *rest)
    return own(p, np.asarray(x, F))


def ieee(fn: Callable) -> Callable:
    """`fn` with f32 overflow to ±inf as the chip's IEEE units give it: the
    algorithms above rely on it (a clamped exp's Taylor sum saturates), so it
    is no error here, although the TPU interpreter raises on overflow."""

    @functools.wraps(fn)
    def kernel(*args, **kwargs):
        with np.errstate(over="ignore"):
            return fn(*args, **kwargs)

    return kernel


CHIP_KERNELS: dict[str, dict[Callable, Callable]] = {
    "bm168x": {
        norm.softmax: ieee(softmax),
        norm.lrn: ieee(lrn),
        norm.layer_norm: ieee(layer_norm),
        pooling.avg_pool: ieee(avg_pool),
        activation.unary: ieee(unary),
        cast.cast: chip_cast.cast,
        elementwise.fold: ieee(fold),  # f32 only (chip_f32)
        elementwise.binary: ieee(binary),
        float_conv.conv: chip_depthwise.conv,
    }
}
"""Per chip family: kernel-library functions the chip computes its own way."""


def chip_kernel(family: str | None, fn: Callable) -> Callable:
    """The chip family's own form of the library function `fn` (else `fn`)."""
    return CHIP_KERNELS.get(family or "", {}).get(fn, fn)
