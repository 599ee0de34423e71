"""F16/BF16 convolution and matmul as the bm168x chip computes them.

Probed on the vendor's chip model (tests/native/test_half_conv.py): the
accumulator is f32 and starts at the bias. The input channels of a group are
cut in blocks of 32; for each block (outer loop) and each kernel position
(inner, row-major) one dot-product unit takes the 32 products, each exact,
cuts each toward zero to a multiple of 2^(E-24) (E: the exponent of the
largest |product| of the unit), rounds their exact sum to f32 (to nearest
even) and adds it to the accumulator (f32, to nearest even). The result is
rounded to the half type once, at the end. A convolution with few input
channels takes TPU-MLIR's 3ic fold (`three_ic_mode`): kernel rows, columns
or both become input channels of the units (`folded`). A matmul by a weight is the 1x1
convolution the native target makes of it (the rows as pixels); a batch
matmul of two activations (no bias) sums each dot product the same way
(tests/native/test_half_conv.py).

The cut needs every product, which BLAS cannot give. So each unit's sum is
taken exactly in float64 by BLAS (uncut), in the chip's order (`fast`);
`slack` bounds how far the cut can move each accumulator, and the outputs
whose rounding to the half type that bound leaves in doubt (a few percent)
are recomputed product by product (`exact`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.kernels import chip_depthwise
from tpuc.kernels.arrays import Array, f32, relu
from tpuc.kernels.conv_plan import pad_spatial, window_strides
from tpuc.kernels.element import Element
from tpuc.kernels.float_conv import ConvAttrs, MatMul
from tpuc.kernels.rounding import half_rounder

BLOCK = 32  # input channels per dot-product unit
KEPT = 24  # bits kept below the largest product's exponent
EXACT_CHUNK = 1 << 21  # products per slice of the exact recomputation


def applies(family: str | None) -> bool:
    """Whether a chip of `family` computes half convolutions this way (the
    bm168x family; None, a test device's made-up chip, keeps the library's)."""
    return family == "bm168x"


@dataclass(frozen=True)
class HalfConv:
    """A convolution whose operands and result are of the half type
    `element`."""

    attrs: ConvAttrs
    element: Element
    fold: bool = True  # the 3ic fold (`three_ic_mode`); a transposed conv's has none


@dataclass(frozen=True)
class HalfMatMul:
    """x @ weight + bias in the half type `element` (the weight without batch)."""

    attrs: MatMul
    element: Element


def largest(v: Array) -> Array:
    """max |v| over the last axis (halving a power-of-two axis: numpy's
    reductions over a short axis are slower than elementwise maxima)."""
    m = np.abs(v)
    while m.shape[-1] > 1 and m.shape[-1] % 2 == 0:
        half = m.shape[-1] // 2
        m = np.maximum(m[..., :half], m[..., half:])
    return m.max(-1)


def exact_units(products: Array) -> Array:
    """[..., block] exact products -> each unit's f32 sum, the chip's way:
    cut toward zero below 2^(E-24), summed exactly, rounded once."""
    top = largest(products)
    _, exp = np.frexp(top)  # top = f * 2^exp, f in [0.5, 1): E = exp - 1
    scaled = products * np.ldexp(1.0, KEPT + 1 - exp).astype(products.dtype)[..., None]
    sums = np.trunc(scaled, out=scaled).sum(-1, dtype=np.float64)
    return np.ldexp(sums, exp - 1 - KEPT).astype(np.float32)


def exact(pk: Array, wk: Array, bias: Array, o: Array, p: Array) -> Array:
    """The accumulators at rows `o`, pixels `p`, product by product: pk
    [P, K, C] the windows, wk [O, K, C] the filter -> [F] f32. Products of
    two half values are exact in f32 (float64 when they could be tiny)."""
    k, c = pk.shape[1:]
    block = min(c, BLOCK)
    blocks = -(-c // block)
    acc = f32(bias)[o]
    step = max(1, EXACT_CHUNK // (blocks * block * k))
    for s in range(0, o.size, step):
        part = acc[s : s + step]
        products = np.multiply(pk[p[s : s + step]], wk[o[s : s + step]])
        if blocks * block != c:
            products = np.concatenate(
                [products, np.zeros((part.size, k, blocks * block - c), products.dtype)], -1
            )
        units = exact_units(products.reshape(part.size, k, blocks, block))
        for u in np.ndindex(blocks, k):  # blocks outer, taps inner
            np.add(part, units[:, u[1], u[0]], out=part)
    return acc


def fast(xk: Array, wk: Array, bias: Array) -> tuple[Array, Array]:
    """xk [K, C, P], wk [K, O, C] (float64), bias [O] -> (acc, walk): the
    f32 accumulators [O, P] with uncut unit sums, in the chip's order, and
    the sum of the |accumulator|s each went through (the bias included)."""
    k, c, p = xk.shape
    acc = np.repeat(f32(bias)[:, None], p, axis=1)
    walk = np.abs(acc)
    tmp = np.empty_like(acc)
    sums = np.empty((wk.shape[1], p))
    for c0 in range(0, c, BLOCK):
        for t in range(k):
            np.matmul(wk[t, :, c0 : c0 + BLOCK], xk[t, c0 : c0 + BLOCK], out=sums)
            tmp[...] = sums  # rounded to f32 (to nearest even)
            np.add(acc, tmp, out=acc)
            np.add(walk, np.abs(acc, out=tmp), out=walk)
    return acc, walk


def block_depths(v: Array, mantissa: int) -> tuple[Array, Array]:
    """v [..., 32] of a half type with `mantissa` fraction bits: per block,
    the largest |value| mx and how many nonzero values are under
    mx·2^(mantissa−11): a superset of those whose lowest bit lies 12 or
    more binades below mx's exponent (the only operands a cut product can
    have: see `slack`)."""
    mags = np.abs(v)
    top = mags.max(-1)
    limit = top * np.float32(2.0 ** (mantissa - 11))
    deep = (mags < limit[..., None]) & (mags > 0)
    return top, deep.sum(-1, dtype=np.float32)


def blocked(v: Array, axis: int) -> Array:
    """v with `axis` (the channels) zero-padded to blocks of 32 and split
    into [..., blocks, 32] as the last two axes."""
    v = np.moveaxis(v, axis, -1)
    pad = -v.shape[-1] % BLOCK
    if v.shape[-1] <= BLOCK:
        return v[..., None, :]
    if pad:
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (pad,), v.dtype)], -1)
    return v.reshape(v.shape[:-1] + (-1, BLOCK))


def slack(cols: Array, w: Array, walk: Array, mantissa: int) -> Array:
    """A bound on |chip − fast| per accumulator [O, P] (cols [C, K, P], w
    [O, C, K] f32). A unit's largest product is at most mx·mw (the largest
    |x| and |w| of its block), so a cut product has one operand with its
    lowest bit 12 binades below the block's largest exponent (x and w
    together would need 24), and each cut moves the sum by under
    2^−24·mx·mw. Both roundings of a unit sum move it by 2^−24·Σ|p| each,
    and each accumulation rounds both sides by 2^−24·|accumulator|."""
    c, k, p = cols.shape
    o = w.shape[0]
    mags = np.abs(w).reshape(o, c * k) @ np.abs(cols).reshape(c * k, p)
    mx, nx = block_depths(blocked(cols.transpose(1, 2, 0), -1), mantissa)  # [K, P, B]
    mw, nw = block_depths(blocked(w.transpose(0, 2, 1), -1), mantissa)  # [O, K, B]
    mx, nx = (a.transpose(0, 2, 1).reshape(-1, p) for a in (mx, nx))  # [K*B, P]
    mw, nw = (a.reshape(o, -1) for a in (mw, nw))  # [O, K*B]
    cuts = mw @ (mx * nx) + (mw * nw) @ mx
    bound = cuts * 2.0**-24 + mags * 2.0**-23 + walk * 2.0**-23
    return (bound * 1.5 + 2.0**-140).astype(np.float32)


def tiny_free(x: Array, w: Array) -> bool:
    """Every nonzero product of x and w is a normal float32 (2^-100 up)."""

    def least(v: Array) -> float:
        mags = np.abs(v)
        return float(np.min(mags, where=mags > 0, initial=np.inf))

    return least(x) * least(w) >= 2.0**-100


MANTISSA = {"bf16": 7, "f16": 10}  # fraction bits of the half types


@dataclass(frozen=True)
class Half:
    """What `accumulate` needs of the operation: the rounding to the half
    type, its fraction bits, and the float type exact products fit in."""

    rounder: Callable[[Array], Array]
    mantissa: int
    products: type

    @staticmethod
    def of(element: Element, x: Array, w: Array) -> Half:
        kind = np.float32 if tiny_free(x, w) else np.float64
        return Half(half_rounder(element), MANTISSA[element.dtype], kind)


def accumulate(cols: Array, w: Array, bias: Array, half: Half) -> Array:
    """The chip's f32 accumulators [O, P] of cols [C, K, P] by w [O, C, K]:
    `fast`, then `exact` where the half rounding of fast ± slack differs."""
    xk = np.ascontiguousarray(cols.transpose(1, 0, 2), dtype=np.float64)
    wk = np.ascontiguousarray(w.transpose(2, 0, 1), dtype=np.float64)
    acc, walk = fast(xk, wk, bias)
    bound = slack(cols, w, walk, half.mantissa)
    doubt = np.nonzero(half.rounder(acc - bound) != half.rounder(acc + bound))
    if doubt[0].size:
        pixels, at = np.unique(doubt[1], return_inverse=True)  # only the windows in doubt
        pk = np.ascontiguousarray(cols[:, :, pixels].transpose(2, 1, 0), dtype=half.products)
        wt = np.ascontiguousarray(w.transpose(0, 2, 1), dtype=half.products)
        acc[doubt] = exact(pk, wt, bias, doubt[0], at.reshape(-1))
    return acc


def im2col(x: Array, attrs: ConvAttrs, kernel: tuple[int, ...]) -> tuple[Array, tuple[int, ...]]:
    """[N, C, *kernel, *out] windows of the padded input, and the out shape."""
    g = attrs.geometry(kernel)
    xp = pad_spatial(x, list(g.begins), list(g.ends))
    out = tuple(
        (xp.shape[2 + i] - (k - 1) * g.dilations[i] - 1) // g.strides[i] + 1
        for i, k in enumerate(kernel)
    )
    shape, strides = window_strides(xp.shape, g, out)
    xp = np.ascontiguousarray(xp)
    view = np.lib.stride_tricks.as_strided(
        xp, shape=shape, strides=tuple(s * xp.itemsize for s in strides), writeable=False
    )
    return view, out


def conv(p: HalfConv, x: Array, w: Array, b: Array | None = None) -> Array:
    """The convolution as the chip computes it, rounded to the half type."""
    x, w = f32(x), f32(w)
    if chip_depthwise.is_depthwise(p.attrs, x, w):  # the native target: in f32 between casts
        return f32(half_rounder(p.element)(chip_depthwise.depthwise(p.attrs, x, w, b)))
    kernel = tuple(w.shape[2:])
    view, out = im2col(x, p.attrs, kernel)
    n, c = x.shape[:2]
    groups, oc = p.attrs.group, w.shape[0]
    cg, og, k, pixels = c // groups, oc // groups, math.prod(kernel), math.prod(out)
    bias = np.zeros(oc, np.float32) if b is None else f32(b).reshape(oc)
    wk = w.reshape(groups, og, cg, k)
    half = Half.of(p.element, x, w)
    y = np.empty((n, oc, pixels), np.float32)
    plane = kernel if len(kernel) == 2 else (kernel[0], 1)  # 1-D: the native target's [k, 1]
    folds = p.fold and groups == 1 and len(kernel) <= 2
    mode = three_ic_mode(cg, *plane) if folds else 0
    for i in range(n):
        for gi in range(groups):
            cols = view[i, gi * cg : (gi + 1) * cg].reshape(cg, k, pixels)
            rows = slice(gi * og, (gi + 1) * og)
            fc, fw = folded(cols, wk[gi], mode, plane)
            y[i, rows] = accumulate(fc, fw, bias[rows], half)
    return finish(y.reshape((n, oc) + out), p.attrs.relu_limit(), half.rounder)


def fc_half_form(rows: int, k: int, n: int) -> bool:
    """Whether tpuc's native target gives an F16/BF16 fc with a bias (M =
    `rows`, K, N) TPU-MLIR's half form, a half bias and a half result,
    whose vendor call (`backend_api_fc_global`) then runs MM2: the product
    rounded to the half type first, the bias added to it. The call takes
    MM2 unless N > 256·M (probed on the vendor's chip model: M = 1 switches
    above N = 256, M = 2 above 512, M = 3 above 768, M = 8 above 2048);
    its other path starts the f32 accumulator at the bias, as a
    convolution does, which tpuc's f32 form (an f32 result, cast) does
    too. MM2 costs more for narrow results (its weight rows are short
    moves): the half form only where it is the cheaper one on the vendor's
    cycles, N ≥ 48 or M ≥ 2 with M·K ≥ 2048 (tests/native/test_half_fc.py)."""
    if n > 256 * rows:
        return False
    return n >= 48 or (rows >= 2 and rows * k >= 2048)


IC_PARALLEL_16 = 32  # 16-bit input channels one lane multiplies at once (BM1684X)


def three_ic_mode(ic: int, kh: int, kw: int) -> int:
    """TPU-MLIR 1.30.2's `use_3ic_optimize` fold of an ungrouped 16-bit
    convolution (its 8-bit rule over 32 input channels instead of 64): 3
    folds kh and kw into the input channels, 2 kw (the taps then run over
    kh), 1 kh; 0 none. The native target passes the flag to the kernel,
    whose dot-product units then take the folded channels: one unit sums
    what were several taps (tests/native/test_half_3ic.py)."""
    return fold_mode(ic, kh, kw, IC_PARALLEL_16)


def fold_mode(ic: int, kh: int, kw: int, parallel: int) -> int:
    """TPU-MLIR's 3ic choice for a lane that multiplies `parallel` input
    channels at once (64 int8, 32 16-bit): 3, 2, 1 or 0 as above."""
    if ic * kh * kw <= parallel and kh > 1 and kw > 1:
        return 3
    if ic * kw <= parallel and kw > 1 and (kh < kw or ic * kh > parallel):
        return 2
    if ic * kh <= parallel and kh > 1:
        return 1
    return 0


def folded(cols: Array, w: Array, mode: int, kernel: tuple[int, ...]) -> tuple[Array, Array]:
    """cols [C, K, P] and w [O, C, K] with the 3ic `mode`'s kernel dims
    folded into the channels: the units and taps the chip sums."""
    if not mode:
        return cols, w
    c, _, p = cols.shape
    o = w.shape[0]
    kh, kw = kernel
    if mode == 3:
        return cols.reshape(c * kh * kw, 1, p), w.reshape(o, c * kh * kw, 1)
    if mode == 1:
        return cols.reshape(c * kh, kw, p), w.reshape(o, c * kh, kw)
    cols = cols.reshape(c, kh, kw, p).transpose(0, 2, 1, 3).reshape(c * kw, kh, p)
    return cols, w.reshape(o, c, kh, kw).transpose(0, 1, 3, 2).reshape(o, c * kw, kh)


def matmul(p: HalfMatMul, x: Array, r: Array, b: Array | None = None) -> Array:
    """x [..., K] @ r [K, N] ([N, K] when transposed) + bias, as the chip's
    fc computes it, rounded: the 1x1 convolution over the rows of x; with a
    bias in the half form (`fc_half_form`) the product rounded to the half
    type, then the bias rounded to it added and the sum rounded."""
    x, r = f32(x), f32(r)
    r = r.reshape(r.shape[-2:])
    w = r if p.attrs.right_transpose else r.T  # [N, K]
    n, k = w.shape
    rows = x.reshape(-1, k)
    bias = np.zeros(n, np.float32) if b is None else f32(b).reshape(n)
    half = Half.of(p.element, x, w)
    after = b is not None and fc_half_form(rows.shape[0], k, n)
    start = np.zeros(n, np.float32) if after else bias
    acc = accumulate(rows.T[:, None, :], w[:, :, None], start, half)
    if after:  # two half values: their f32 sum rounds to the half type as their exact sum
        acc = half.rounder(acc) + half.rounder(bias)[:, None]
    limit = ConvAttrs(relu=p.attrs.relu).relu_limit()
    return finish(acc.T.reshape(x.shape[:-1] + (n,)), limit, half.rounder)


def batch_matmul(p: HalfMatMul, x: Array, r: Array) -> Array:
    """x [..., M, K] @ r [..., K, N] ([..., N, K] when transposed), the same
    batch dims, no bias: the chip's batch matmul, whose dot-product units
    follow the same rule (blocks of 32 along K, cut products, an f32
    accumulator from 0), rounded."""
    x, r = f32(x), f32(r)
    if p.attrs.right_transpose:
        r = np.swapaxes(r, -1, -2)
    batch, (m, k), n = x.shape[:-2], x.shape[-2:], r.shape[-1]
    xs, rs = x.reshape(-1, m, k), r.reshape(-1, k, n)
    half = Half.of(p.element, x, r)
    zeros = np.zeros(n, np.float32)
    acc = np.empty((xs.shape[0], m, n), np.float32)
    for i in range(xs.shape[0]):
        acc[i] = accumulate(xs[i].T[:, None, :], rs[i].T[:, :, None], zeros, half).T
    limit = ConvAttrs(relu=p.attrs.relu).relu_limit()
    return finish(acc.reshape(batch + (m, n)), limit, half.rounder)


def finish(y: Array, relu_limit: float | None, rounder: Callable[[Array], Array]) -> Array:
    """The fused ReLU (None: none) on the f32 accumulators, then the rounding."""
    if relu_limit is not None:
        relu(y, relu_limit)
    return f32(rounder(y))
