"""Control flow: `If`.

A condition known at conversion time inlines the branch it selects. A
condition computed at run time converts both branches and picks each output
with `top.Where`, which is exact when both branches are side-effect free
(always, in ONNX) and give outputs of one shape.
"""

from __future__ import annotations

from onnx import GraphProto, NodeProto

from tpuc.dialects import top
from tpuc.frontends.onnx import graph as g
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.registry import converter


def inline_branch(cv: OnnxConverter, branch: GraphProto) -> list[str]:
    """Convert a subgraph's nodes in the current function; its outputs'
    tensor names."""
    for t in branch.initializer:
        cv.consts[t.name] = g.tensor_array(t, cv.path)
    cv.convert_nodes(branch.node)
    return [o.name for o in branch.output]


@converter("If")
def convert_if(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    cond = cv.const(node.input[0])
    if cond is not None:
        branch = attrs["then_branch"] if bool(cond.reshape(-1)[0]) else attrs["else_branch"]
        for name, src in zip(node.output, inline_branch(cv, branch), strict=True):
            cv.bind(name, cv.consts[src] if cv.is_const(src) else cv.value(src))
        return
    then_outs = inline_branch(cv, attrs["then_branch"])
    else_outs = inline_branch(cv, attrs["else_branch"])
    flag = cv.value(node.input[0])
    for name, t, e in zip(node.output, then_outs, else_outs, strict=True):
        if cv.shape(t) != cv.shape(e):
            raise cv.error(
                node, f"branches give '{name}' different shapes ({cv.shape(t)} vs {cv.shape(e)})"
            )
        cv.emit(top.WhereOp, [flag, cv.value(t), cv.value(e)], name, shape=cv.shape(t))
