"""Float LSTM and GRU on `Recurrent` records, with ONNX layouts and gate orders (LSTM: i, o, f, c;
GRU: z, r, h; bias = [Wb, Rb]). The input projection of every time step is
one matmul; only the recurrence runs step by step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, f32


@dataclass(frozen=True)
class Recurrent:
    """`hidden` 0: from R's shape. `linear_before_reset`: GRU only."""

    hidden: int = 0
    batch_first: bool = False
    linear_before_reset: bool = False


def sigmoid(x: Array) -> Array:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


class Recurrence:
    """The shared unpacking of a recurrent op's operands (computed in float64)."""

    def __init__(self, p: Recurrent, args: tuple[Array | None, ...], gates: int):
        x, w, r, b, h0 = args[:5]
        self.batch_first = p.batch_first
        if self.batch_first:
            x = np.swapaxes(x, 0, 1)
        self.x = x.astype(np.float64)  # [seq, batch, input]
        self.w, self.r = w.astype(np.float64), r.astype(np.float64)
        self.dirs = w.shape[0]
        self.hidden = p.hidden or r.shape[-1]
        size = gates * self.hidden
        self.b = np.zeros((self.dirs, 2 * size)) if b is None else b.astype(np.float64)
        self.h0 = self.state(h0)

    def state(self, s: Array | None) -> Array:
        """Initial state as [dirs, batch, hidden]."""
        batch = self.x.shape[1]
        if s is None:
            return np.zeros((self.dirs, batch, self.hidden))
        s = s.astype(np.float64)
        return np.swapaxes(s, 0, 1) if self.batch_first else s

    def steps(self, d: int) -> range:
        seq = self.x.shape[0]
        return range(seq - 1, -1, -1) if d == 1 else range(seq)

    def projected(self, d: int) -> Array:
        """x_t @ W^T + Wb for every step: [seq, batch, gates*hidden]."""
        size = self.w.shape[1]
        return self.x @ self.w[d].T + self.b[d, :size]

    def outputs(self, ys: list[Array], finals: list[list[Array]]) -> tuple[Array, ...]:
        """Y [seq, dirs, batch, hidden] and the final states [dirs, batch,
        hidden] (batch-first layouts when `batch_first`)."""
        y = np.stack(ys, axis=1)
        states = [np.stack(f) for f in finals]
        if self.batch_first:
            y = y.transpose(2, 0, 1, 3)
            states = [np.swapaxes(s, 0, 1) for s in states]
        return tuple(f32(a) for a in (y, *states))


def lstm(p: Recurrent, *args: Array | None) -> tuple[Array, Array, Array]:
    rec = Recurrence(p, args, 4)
    c0 = rec.state(args[5] if len(args) > 5 else None)
    hid = rec.hidden
    ys, last_h, last_c = [], [], []
    for d in range(rec.dirs):
        xw = rec.projected(d)
        rb = rec.b[d, 4 * hid :]
        h, c = rec.h0[d], c0[d]
        y = np.zeros((rec.x.shape[0],) + h.shape)
        for t in rec.steps(d):
            g = xw[t] + h @ rec.r[d].T + rb
            i, o, f = (sigmoid(g[:, k * hid : (k + 1) * hid]) for k in range(3))
            cand = np.tanh(g[:, 3 * hid :])
            c = f * c + i * cand
            h = o * np.tanh(c)
            y[t] = h
        ys.append(y)
        last_h.append(h)
        last_c.append(c)
    return rec.outputs(ys, [last_h, last_c])


def gru(p: Recurrent, *args: Array | None) -> tuple[Array, Array]:
    rec = Recurrence(p, args, 3)
    hid = rec.hidden
    before_reset = p.linear_before_reset
    ys, last_h = [], []
    for d in range(rec.dirs):
        xw = rec.projected(d)
        rb = rec.b[d, 3 * hid :]
        r_zr, r_h = rec.r[d, : 2 * hid], rec.r[d, 2 * hid :]
        h = rec.h0[d]
        y = np.zeros((rec.x.shape[0],) + h.shape)
        for t in rec.steps(d):
            zr = sigmoid(xw[t, :, : 2 * hid] + h @ r_zr.T + rb[: 2 * hid])
            z, r = zr[:, :hid], zr[:, hid:]
            if before_reset:
                cand = np.tanh(xw[t, :, 2 * hid :] + r * (h @ r_h.T + rb[2 * hid :]))
            else:
                cand = np.tanh(xw[t, :, 2 * hid :] + (r * h) @ r_h.T + rb[2 * hid :])
            h = (1.0 - z) * cand + z * h
            y[t] = h
        ys.append(y)
        last_h.append(h)
    return rec.outputs(ys, [last_h])
