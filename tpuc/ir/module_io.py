"""Reading and writing a module together with its weight npz.

The .mlir text names its weight file in `module.weight_file`, relative to
the directory of the .mlir file (TPU-MLIR writes both side by side).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import ParseError

from tpuc.base.errors import TpucError
from tpuc.base.files import OutputSet, load_npz, read_bytes
from tpuc.base.ir_text import check_ir_text, decode_ir
from tpuc.dialects.base import from_attr, to_attr
from tpuc.ir.weights import WeightStore, attach_weights, check_weight_file, live_weights


def module_attr(module: ModuleOp, key: str, default: Any = None) -> Any:
    """A `module.<key>` attribute as a Python value."""
    attr = module.attributes.get(f"module.{key}")
    return default if attr is None else from_attr(attr)


def set_module_attr(module: ModuleOp, key: str, value: Any) -> None:
    module.attributes[f"module.{key}"] = to_attr(value)


def module_text(module: ModuleOp) -> str:
    """The module in TPU-MLIR's textual form (generic ops, custom func)."""
    import io

    from xdsl.printer import Printer

    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    stream.write("\n")
    return stream.getvalue()


def parse_module(text: str, source: str = "<string>") -> ModuleOp:
    """Parse and verify IR text; errors name the file, the line and the reason."""
    from xdsl.parser import Parser

    from tpuc.ir.context import make_context

    check_ir_text(text, source)
    try:
        module = Parser(make_context(), text, source).parse_module()
        module.verify()
    except ParseError as exc:
        raise TpucError(f"{source}: invalid IR: {parse_error_message(exc)}") from None
    except Exception as exc:  # verifier errors carry multi-line context
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TpucError(f"{source}: invalid IR: {line}") from None
    check_dominance(module, source)
    return module


def parse_error_message(exc: ParseError) -> str:
    """`line L:C: reason` from an xDSL parse error (its text repeats the
    source line and a caret, which do not fit on one line)."""
    span = getattr(exc, "span", None)
    msg = getattr(exc, "msg", None)
    if not msg:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        msg = lines[-1] if lines else type(exc).__name__
    if span is None:
        return msg
    location = span.get_location()
    return f"line {location.line}:{location.col}: {msg}"


def check_dominance(module: ModuleOp, source: str) -> None:
    """Every operand is defined before its use (xDSL's parser accepts forward
    references, and the interpreters would fail on them with a KeyError)."""
    _check_region_values(module, set(), source)


def _check_region_values(op: Operation, visible: set[SSAValue], source: str) -> None:
    """Operands of ops nested in `op` are in `visible`, block arguments or
    results of earlier ops of their block (any block of a multi-block region)."""
    for region in op.regions:
        scope = set(visible)
        if len(region.blocks) > 1:  # CFG regions: no dominance tree here, accept any block
            for block in region.blocks:
                scope.update(block.args)
                for inner in block.ops:
                    scope.update(inner.results)
        for block in region.blocks:
            seen = scope | set(block.args)
            for inner in block.ops:
                for index, operand in enumerate(inner.operands):
                    if operand not in seen:
                        raise TpucError(
                            f"{source}: invalid IR: operand {index} of {_describe(inner)} "
                            f"is used before its definition ({_producer(operand)})"
                        )
                _check_region_values(inner, seen, source)
                seen.update(inner.results)


def _describe(op: Operation) -> str:
    name = op.attributes.get("name")
    return f"{op.name} '{from_attr(name)}'" if name is not None else op.name


def _producer(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, Operation):
        return f"a result of {_describe(owner)}"
    return "a block argument of another block"


def read_module_text(path: str | os.PathLike[str]) -> str:
    """The checked text of a .mlir file; unreadable files are TpucErrors."""
    data = read_bytes(path, ".mlir file")
    return decode_ir(data, str(path))


def load_module(path: str | os.PathLike[str]) -> tuple[ModuleOp, WeightStore]:
    """A module and its weights (attached so passes can read them)."""
    mlir = Path(path)
    module = parse_module(read_module_text(mlir), str(path))
    store = WeightStore()
    weight_file = module_attr(module, "weight_file")
    if weight_file:
        candidate = mlir.parent / weight_file
        if not candidate.is_file() and Path(weight_file).is_file():
            candidate = Path(weight_file)
        if not candidate.is_file():
            raise TpucError(f"{path}: its weight file {weight_file} is missing")
        store.update(load_npz(candidate))
        check_weight_file(module, store, str(candidate))
    attach_weights(module, store)
    return module, store


def save_module(
    out: OutputSet,
    module: ModuleOp,
    mlir_path: str | os.PathLike[str],
    store: WeightStore,
    weight_path: str | os.PathLike[str] | None = None,
) -> None:
    """Stage the .mlir and (if given) its weight npz, keeping only live weights."""
    if weight_path is not None:
        set_module_attr(module, "weight_file", os.path.basename(weight_path))
        out.save_npz(weight_path, live_weights(module, store))
    out.write_text(mlir_path, module_text(module))
