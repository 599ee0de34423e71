"""The xDSL context with every dialect tpuc reads and writes."""

from __future__ import annotations

from xdsl.context import Context


def make_context() -> Context:
    """A context that parses tpuc's IR files (builtin, func, top, tpu, quant)."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from tpuc.dialects.quant import Quant
    from tpuc.dialects.top import Top
    from tpuc.dialects.tpu import Tpu

    ctx = Context()
    for dialect in (Builtin, Func, Top, Tpu, Quant):
        ctx.load_dialect(dialect)
    return ctx
