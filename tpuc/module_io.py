"""Reading and writing a module together with its weight npz.

The .mlir text names its weight file in `module.weight_file`, relative to
the directory of the .mlir file (TPU-MLIR writes both side by side).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import ParseError

from tpuc.dialects.base import from_attr, to_attr
from tpuc.errors import TpucError
from tpuc.files import OutputSet, load_npz
from tpuc.weights import WeightStore, attach_weights, live_weights


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
    """Parse and verify IR text; errors name the file and line."""
    from xdsl.parser import Parser

    from tpuc.context import make_context

    try:
        module = Parser(make_context(), text, source).parse_module()
        module.verify()
    except ParseError as exc:
        first = str(exc).strip().splitlines()
        raise TpucError(f"{source}: invalid IR: {' '.join(first[:2])}") from None
    except Exception as exc:  # verifier errors carry multi-line context
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TpucError(f"{source}: invalid IR: {line}") from None
    return module


def load_module(path: str | os.PathLike[str]) -> tuple[ModuleOp, WeightStore]:
    """A module and its weights (attached so passes can read them)."""
    mlir = Path(path)
    if not mlir.is_file():
        raise TpucError(f"{path}: no such file")
    module = parse_module(mlir.read_text(), str(path))
    store = WeightStore()
    weight_file = module_attr(module, "weight_file")
    if weight_file:
        candidate = mlir.parent / weight_file
        if not candidate.is_file() and Path(weight_file).is_file():
            candidate = Path(weight_file)
        if not candidate.is_file():
            raise TpucError(f"{path}: its weight file {weight_file} is missing")
        store.update(load_npz(candidate))
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
