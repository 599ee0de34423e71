"""Convolution as GEMM blocks.

Every (batch item, group) is one product y[n, g] = W[g] @ col[n, g] with
W[g] [M, K] and col [K, L] (L output pixels), cut into blocks; a block runs
its GEMM and then the bias and ReLU on its own output while it is still in
cache. With worker threads (see `executor`) the blocks are shared out; by
default they run in turn and BLAS threads each GEMM. Two cuts:

- `rows`: blocks of output channels over the whole col: a 1x1 stride-1 conv
  reads its input as col in place, other convs first copy the im2col matrix
  whole. Best for many output channels over few pixels (deep layers), where
  BLAS would re-pack col for every block of columns.
- `tiles`: blocks of output rows (first spatial axis); each block copies
  just its im2col columns into a per-thread buffer of about an L2 cache, so
  BLAS packs them from L2 and the whole matrix never exists. Best for few
  output channels over many pixels (early layers, big images).

Cutting M or L does not change any dot product's summation order, so the
result is the same as one BLAS call's. A plan holds all of this for one
(op, shapes) and is kept by the interpreter's executor: later runs only
execute it.
"""

from __future__ import annotations

import math

import numpy as np

from tpuc.kernels.arrays import Array, relu
from tpuc.kernels.executor import Executor

TILE_BYTES = 1 << 20  # im2col columns per `tiles` block: about an L2 cache
WHOLE_COL_BYTES = 8 << 20  # larger im2col matrices are only built as tiles
ROWS_MIN_M = 256  # `rows` needs this many output channels per group
ROWS_PER_BLOCK = 32  # smallest block of output channels

Block = tuple[int, int, int, int, int, int]  # n, g, m0, m1, l0, l1


class GemmConvPlan:
    """One convolution's shapes, im2col view and blocks.

    `src_shape` is the (padded) input the im2col view reads, `windows` its
    element strides as [N, C, *K, *O] (None: a 1x1 stride-1 conv reading
    the input directly); `relu_limit` None means no ReLU, < 0 an unbounded one.
    """

    def __init__(
        self,
        x_shape: tuple[int, ...],
        w_shape: tuple[int, ...],
        out: tuple[int, ...],
        windows: tuple[tuple[int, ...], tuple[int, ...]] | None,
        relu_limit: float | None,
        rt: Executor,
    ):
        self.n_batch, channels = x_shape[:2]
        oc, self.cg = w_shape[:2]
        self.groups = channels // self.cg
        self.m, self.k = oc // self.groups, self.cg * math.prod(w_shape[2:])
        self.out, self.length = out, math.prod(out)
        self.y_shape = (self.n_batch, oc) + out
        self.windows = windows
        self.relu_limit = relu_limit
        self.by_rows = windows is None or (
            self.m >= ROWS_MIN_M and self.k * self.length * 4 <= WHOLE_COL_BYTES
        )
        work = self.m * self.k * self.length
        self.blocks = self._rows(rt, work) if self.by_rows else self._tiles(rt, work)
        # Bias and ReLU run per block when its output is contiguous; over
        # the strided columns of a tile numpy is slow, so then they run
        # afterwards on whole output channels.
        self.late = (
            []
            if all(b[4] == 0 and b[5] == self.length for b in self.blocks)
            else self._rows(rt, work)
        )

    def _rows(self, rt: Executor, work: int) -> list[Block]:
        step = -(-self.m // rt.shards(work, max(1, self.m // ROWS_PER_BLOCK)))
        return [
            (n, g, lo, min(self.m, lo + step), 0, self.length)
            for n in range(self.n_batch)
            for g in range(self.groups)
            for lo in range(0, self.m, step)
        ]

    def _tiles(self, rt: Executor, work: int) -> list[Block]:
        rows = self.out[0]
        inner = self.length // rows if rows else 0
        step = -(-rows // rt.shards(work, rows))
        step = max(1, min(step, TILE_BYTES // max(1, self.k * inner * 4)))
        return [
            (n, g, 0, self.m, r * inner, min(rows, r + step) * inner)
            for n in range(self.n_batch)
            for g in range(self.groups)
            for r in range(0, rows, step)
        ]

    def run(self, src: Array, w: Array, bias: Array | None, rt: Executor) -> Array:
        """The conv of `src` (the input, already padded into a contiguous
        buffer unless 1x1 stride-1): a fresh array of `y_shape`."""
        y = rt.empty(self.y_shape)
        if not y.size:
            return y
        if self.windows is None:
            col = src.reshape(self.n_batch, self.groups, self.cg, self.length)
        else:
            shape, strides = self.windows  # a view of src (cheaper than as_strided)
            col = np.ndarray(shape, np.float32, buffer=src, strides=tuple(4 * s for s in strides))
            if self.by_rows:
                col = self._whole_col(col, rt)
        job = _Job(self, y, w, bias, col, rt)
        rt.parallel_for(len(self.blocks), job.block)
        if self.late:
            rt.parallel_for(len(self.late), job.epilogue)
        return y

    def _whole_col(self, win: Array, rt: Executor) -> Array:
        """The im2col matrix [N, G, K, L] in one buffer, copied by channel
        chunks (in parallel with worker threads)."""
        col = rt.scratch("conv_col_whole", win.shape)
        chunks = rt.shards(col.size * 8, win.shape[1])
        step = -(-win.shape[1] // chunks)
        jobs = [(n, c) for n in range(self.n_batch) for c in range(0, win.shape[1], step)]

        def copy(i: int) -> None:
            n, c = jobs[i]
            np.copyto(col[n, c : c + step], win[n, c : c + step])

        rt.parallel_for(len(jobs), copy)
        return col.reshape(self.n_batch, self.groups, self.k, self.length)


class _Job:
    """The arrays of one execution of a plan, for its blocks to work on."""

    def __init__(self, plan: GemmConvPlan, y: Array, w: Array, bias, col: Array, rt: Executor):
        p = plan
        self.plan, self.rt, self.col = p, rt, col
        self.y = y.reshape(p.n_batch, p.groups, p.m, p.length)
        self.w = w.reshape(p.groups, p.m, p.k)
        self.bias = None if bias is None else bias.reshape(p.groups, p.m, 1)

    def block(self, i: int) -> None:
        n, g, m0, m1, l0, l1 = self.plan.blocks[i]
        y = self.y[n, g, m0:m1, l0:l1]
        np.matmul(self.w[g, m0:m1], self._col(n, g, l0, l1), out=y)
        if not self.plan.late:
            self._finish(y, g, m0, m1)

    def epilogue(self, i: int) -> None:
        n, g, m0, m1, _, _ = self.plan.late[i]
        self._finish(self.y[n, g, m0:m1], g, m0, m1)

    def _finish(self, y: Array, g: int, m0: int, m1: int) -> None:
        if self.bias is not None:
            y += self.bias[g, m0:m1]
        if self.plan.relu_limit is not None:
            relu(y, self.plan.relu_limit)

    def _col(self, n: int, g: int, l0: int, l1: int) -> Array:
        """col[n, g][:, l0:l1]: a view of the input / whole im2col matrix, or
        the block's im2col columns copied into this thread's buffer."""
        p = self.plan
        if p.by_rows:
            return self.col[n, g, :, l0:l1]
        inner = p.length // p.out[0]
        view = self.col[n, g * p.cg : (g + 1) * p.cg]
        view = view[(Ellipsis, slice(l0 // inner, l1 // inner)) + (slice(None),) * (len(p.out) - 1)]
        tile = self.rt.scratch("conv_col_tile", view.shape)
        np.copyto(tile, view)
        return tile.reshape(p.k, l1 - l0)
