"""Integer references for the kernel tests: requantization in Python
integers and brute-force int64 (transposed) convolutions, written from the
definitions, independent of the kernels under test."""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(20240521)
RANGES = {"i8": (-128, 127), "u8": (0, 255)}


def rq(value: int, m: int, r: int) -> int:
    """round(value·m / 2^r), ties away from zero, exactly."""
    p = int(value) * int(m)
    if r <= 0:
        return p << -r
    q, rem = divmod(abs(p), 1 << r)
    q += 2 * rem >= (1 << r)
    return q if p >= 0 else -q


def ref_output(acc, m, r, zp, storage, axis=1, relu=False, limit_q=None) -> np.ndarray:
    """requant per element (m, r: scalars or per-`axis` lists), + zp, relu,
    saturation."""
    acc = np.asarray(acc, np.int64)
    lo, hi = RANGES[storage]
    m, r = np.atleast_1d(m), np.atleast_1d(r)
    out = np.empty(acc.shape, np.float32)
    for idx in np.ndindex(*acc.shape):
        c = idx[axis] if m.size > 1 else 0
        v = rq(acc[idx], m[c], r[c]) + zp
        if relu:
            v = max(v, zp) if limit_q is None else min(max(v, zp), limit_q)
        out[idx] = min(max(v, lo), hi)
    return out


def ref_conv(x, w, zx, strides, pads, dils, group) -> np.ndarray:
    x = x.astype(np.int64) - zx
    w = w.astype(np.int64)
    n = x.ndim - 2
    oc, cg, kernel = w.shape[0], w.shape[1], w.shape[2:]
    begins, ends = pads[:n], pads[n:]
    out = [
        (x.shape[2 + i] + begins[i] + ends[i] - (kernel[i] - 1) * dils[i] - 1) // strides[i] + 1
        for i in range(n)
    ]
    y = np.zeros((x.shape[0], oc, *out), np.int64)
    per_group = oc // group
    for o in range(oc):
        chans = slice(o // per_group * cg, (o // per_group + 1) * cg)
        for pos in np.ndindex(*out):
            for tap in np.ndindex(*kernel):
                src = [pos[i] * strides[i] - begins[i] + tap[i] * dils[i] for i in range(n)]
                if all(0 <= s < x.shape[2 + i] for i, s in enumerate(src)):
                    y[(slice(None), o, *pos)] += (
                        x[(slice(None), chans, *src)] @ w[(o, slice(None), *tap)]
                    )
    return y


def ref_deconv(x, w, zx, strides, pads, dils, group, out_pad) -> np.ndarray:
    x = x.astype(np.int64) - zx
    w = w.astype(np.int64)
    n = x.ndim - 2
    ic, m, kernel = w.shape[0], w.shape[1], w.shape[2:]
    full = [
        (x.shape[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dils[i] + 1 + out_pad[i]
        for i in range(n)
    ]
    y = np.zeros((x.shape[0], group * m, *full), np.int64)
    cg = ic // group
    for c in range(ic):
        outs = slice(c // cg * m, (c // cg + 1) * m)
        for pos in np.ndindex(*x.shape[2:]):
            for tap in np.ndindex(*kernel):
                dst = [pos[i] * strides[i] + tap[i] * dils[i] for i in range(n)]
                y[(slice(None), outs, *dst)] += np.outer(
                    x[(slice(None), c, *pos)], w[(c, slice(None), *tap)]
                )
    crop = tuple(slice(pads[i], full[i] - pads[n + i]) for i in range(n))
    return y[(slice(None), slice(None), *crop)]


def geometry(attrs, n):
    return (
        attrs.get("strides", [1] * n),
        attrs.get("pads", [0] * (2 * n)),
        attrs.get("dilations", [1] * n),
        attrs.get("group", 1),
    )


def extreme_case(storage, zp, group=1):
    """64 channels per group x 3x3 (K = 576) of extreme values: sums beyond
    2^24."""
    x = np.full((1, 64 * group, 5, 5), RANGES[storage][0 if zp > 0 else 1], np.float32)
    x[0, ::7, 1, 2] = RANGES[storage][1 if zp > 0 else 0]
    w = np.empty((4 * group, 64, 3, 3), np.float32)
    w[0::4], w[1::4] = 127, -128
    w[2::4] = RNG.choice([-128.0, 127.0], size=(group, 64, 3, 3))
    w[3::4] = RNG.choice([-128.0, 127.0], size=(group, 64, 3, 3))
    return x, w
