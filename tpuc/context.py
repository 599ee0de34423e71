"""The xDSL context with every dialect tpuc reads and writes."""

from __future__ import annotations

from xdsl.context import Context


def make_context() -> Context:
    """A context that parses tpuc's IR files (builtin, func, top, quant)."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from tpuc.dialects.top import Top

    ctx = Context()
    for dialect in (Builtin, Func, Top):
        ctx.load_dialect(dialect)
    try:
        from tpuc.dialects.quant import Quant
    except ImportError:  # the quant types arrive with calibration support
        return ctx
    ctx.load_dialect(Quant)
    return ctx
