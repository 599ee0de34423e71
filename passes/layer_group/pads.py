"""Window pads of a slice: what a conv, deconv or pool computes at a slice's edges.

A slice of a window op reads only the input rows its output rows need
(slicing); its taps past those rows are the tensor's own pads on the
slices at the tensor's edges and, on inner slices, nothing (the halo rows
are read instead). The layer-group pass writes these per slice into the
op's `#tpu.pads` (tpuc.dialects.tpu.group_attrs); codegen reads them.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.base.errors import TpucError
from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.layer_group.slicing import Range

WINDOW_OPS = (tpu.Conv2DOp, tpu.DeconvOp, tpu.Pool2DOp)
PAD_AXES = ("h", "w")


def _geometry(op: Operation, axis: int) -> tuple[int, int, int, int, int]:
    """(kernel, stride, dilation, begin pad, end pad) of a window op along
    spatial `axis` (0: H, 1: W)."""
    kernel = [int(k) for k in op.value("kernel_shape")]  # type: ignore[attr-defined]
    n = len(kernel)
    strides = [int(s) for s in op.value("strides") or [1] * n]  # type: ignore[attr-defined]
    dilations = [int(d) for d in op.value("dilations") or [1] * n]  # type: ignore[attr-defined]
    pads = [int(p) for p in op.value("pads") or [0] * 2 * n]  # type: ignore[attr-defined]
    return kernel[axis], strides[axis], dilations[axis], pads[axis], pads[n + axis]


def slice_pads(
    op: Operation, axis: int, out: Range, read: Range, full: int
) -> tuple[int, int, int]:
    """(begin pad, end pad, output padding) of a window op's slice along
    spatial `axis` computing output rows `out` from input rows `read`.

    Conv / pool: the taps' span beyond the rows read (the tensor's own end
    pad on the slice that ends at the edge: ceil mode keeps its overhang).
    Transposed conv: the crop of the slice's uncropped output that leaves
    rows `out` (zero rows appended as output padding where the slice's
    inputs end before them: no input past `read` reaches `out`)."""
    kernel, stride, dilation, begin_pad, end_pad = _geometry(op, axis)
    span = (kernel - 1) * dilation + 1
    if isinstance(op, tpu.DeconvOp):
        begin = out[0] + begin_pad - read[0] * stride
        end = (read[1] - 1) * stride + span - begin - out[1]
        if begin < 0:
            raise TpucError(f"{op.name}: output rows {out} start before its inputs {read} reach")
        return begin, max(end, 0), max(-end, 0)
    start = out[0] * stride - begin_pad
    last = (out[0] + out[1] - 1) * stride - begin_pad + span
    begin = read[0] - start
    finish = end_pad if out[0] + out[1] == full else last - (read[0] + read[1])
    return begin, finish, 0


def window_pads(
    op: Operation, out: dict[str, list[Range]], read: dict[str, list[Range]]
) -> dict[str, list[tuple[int, int, int]]] | None:
    """The pads of every slice of a window op along h and w, from its
    result's slices `out` and the slices of its input it reads; None when
    the op is not a window op or is sliced along neither h nor w (it then
    keeps its own pads)."""
    if not isinstance(op, WINDOW_OPS):
        return None
    full = shape_of(op.results[0])
    assert full is not None
    if all(out[a] == [(0, full[2 + k])] for k, a in enumerate(PAD_AXES)):
        return None
    return {
        a: [slice_pads(op, k, o, r, full[2 + k]) for o, r in zip(out[a], read[a], strict=True)]
        for k, a in enumerate(PAD_AXES)
    }


__all__ = ["WINDOW_OPS", "slice_pads", "window_pads"]
