"""`tpuc-opt`: xDSL's opt driver with tpuc's dialects and passes.

    tpuc-opt model.mlir -p shape-infer,canonicalize [-o out.mlir] [--weight-output w.npz]

Weights: when the module names a `module.weight_file` that exists (next to
the input file, or relative to the working directory) it is loaded and
attached so folding passes see real data; otherwise `top.Weight` ops must
carry inline `value` attributes (tiny lit tests). Weights created by passes
are written only with `--weight-output`. Bad input or a `TpucError` from a
pass ends with one `error: ...` line and exit status 1.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp
from xdsl.xdsl_opt_main import xDSLOptMain

from tpuc.base.errors import TpucError, run_cli

if TYPE_CHECKING:
    import numpy as np
    from xdsl.ir import Dialect

    from tpuc.ir.weights import WeightStore


class _StagedText(io.StringIO):
    """Output text kept in memory until the whole run succeeded."""

    text: str = ""

    def close(self) -> None:
        self.text = self.getvalue()
        super().close()


def _dialect_factories() -> dict[str, Callable[[], Dialect]]:
    """Dialect name -> factory, imported only when the parser meets it."""

    def builtin():
        from xdsl.dialects.builtin import Builtin

        return Builtin

    def func():
        from xdsl.dialects.func import Func

        return Func

    def top():
        from tpuc.dialects.top import Top

        return Top

    def quant():
        from tpuc.dialects.quant import Quant

        return Quant

    def tpu():
        from tpuc.dialects.tpu import Tpu

        return Tpu

    return {"builtin": builtin, "func": func, "top": top, "quant": quant, "tpu": tpu}


class TpucOptMain(xDSLOptMain):
    """The opt driver restricted to what tpuc reads, runs and writes."""

    def __init__(self, args: Sequence[str] | None = None):
        self._loaded: dict[str, Path] = {}
        self._weights_out: dict[str, np.ndarray] = {}
        self._staged: _StagedText | None = None
        super().__init__(description="tpuc modular optimizer driver", args=args)

    def register_all_dialects(self) -> None:
        for name, factory in _dialect_factories().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        from tpuc.passes.registry import get_all_passes
        from tpuc.workflow.pipeline import STAGE_PASSES

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)
        for name, stage in STAGE_PASSES.items():  # whole stages of tpuc.workflow.pipeline
            self.register_pass(name, lambda stage=stage: stage)

    def register_all_frontends(self) -> None:
        """MLIR text is decoded and checked by tpuc.base.ir_text before xDSL's
        lexer sees it (an unclosed string literal would make it backtrack
        for minutes)."""
        from xdsl.parser import Parser
        from xdsl.utils.exceptions import ParseError

        from tpuc.base.ir_text import check_ir_text, decode_ir

        def parse_mlir(stream: IO[bytes]) -> ModuleOp:
            source = self.get_input_name()
            text = decode_ir(stream.read(), source)
            check_ir_text(text, source)
            try:
                return Parser(self.ctx, text, source).parse_module(not self.args.no_implicit_module)
            except ParseError:
                raise
            except Exception as exc:  # xDSL raises plain errors, e.g. for a block named ^%8
                raise TpucError(f"{source}: invalid IR: {_one_line(exc)}") from None

        self.available_frontends["mlir"] = parse_mlir

    def register_all_targets(self) -> None:
        def mlir():
            from xdsl.targets.mlir import MLIRTarget

            return MLIRTarget

        self.available_targets["mlir"] = mlir

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--weight-output",
            default=None,
            help="write the live weights (including folded ones) to this npz and "
            "point module.weight_file at it",
        )

    def prepare_output(self):
        if self.args.output_file is None:
            return sys.stdout
        self._staged = _StagedText()
        return self._staged

    def apply_passes(self, prog: ModuleOp) -> None:
        from tpuc.ir.module_io import check_dominance

        check_dominance(prog, self.args.input_file or "<stdin>")
        store = self._attach_weights(prog)
        super().apply_passes(prog)
        self._collect_weights(prog, store)

    def run(self) -> None:
        from tpuc.base.files import OutputSet

        super().run()
        protected = tuple(self._loaded.values())
        if self.args.input_file:
            protected += (self.args.input_file,)
        with OutputSet(protected=protected) as out:
            if self.args.weight_output is not None:
                out.save_npz(self.args.weight_output, self._weights_out)
            if self._staged is not None:
                out.write_text(self.args.output_file, self._staged.text)

    def _attach_weights(self, prog: ModuleOp) -> WeightStore:
        """Load the module's weight file when it can be found."""
        from tpuc.base.files import load_npz
        from tpuc.ir.module_io import module_attr
        from tpuc.ir.weights import WeightStore, attach_weights, check_weight_file

        store = WeightStore()
        name = module_attr(prog, "weight_file")
        path = self._find_weight_file(name) if name else None
        if path is not None:
            store.update(load_npz(path))
            check_weight_file(prog, store, str(path))
            self._loaded[name] = path
        attach_weights(prog, store)
        return store

    def _find_weight_file(self, name: str) -> Path | None:
        places = [Path(name)]
        if self.args.input_file:
            places.insert(0, Path(self.args.input_file).parent / name)
        return next((p for p in places if p.is_file()), None)

    def _collect_weights(self, prog: ModuleOp, store: WeightStore) -> None:
        """Remember the live weights for --weight-output; warn when passes
        made weights that would otherwise be lost."""
        from tpuc.ir.module_io import module_attr, set_module_attr
        from tpuc.ir.weights import live_weights

        weight_file = module_attr(prog, "weight_file")
        if self.args.weight_output is not None:
            self._weights_out.update(live_weights(prog, store))
            set_module_attr(prog, "weight_file", Path(self.args.weight_output).name)
        elif weight_file in self._loaded:
            fresh = set(live_weights(prog, store)) - set(_npz_names(self._loaded[weight_file]))
            if fresh:
                print(
                    f"warning: {len(fresh)} new weight(s) are not saved; "
                    "pass --weight-output to write them",
                    file=sys.stderr,
                )


def _npz_names(path: Path) -> list[str]:
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        return list(data.files)


def _one_line(exc: BaseException) -> str:
    """The first meaningful line of a multi-line xDSL diagnostic."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _main(argv: Sequence[str] | None) -> int:
    from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError

    try:
        driver = TpucOptMain(args=argv)
    except ArgSpecParseError as exc:  # a malformed -p pipeline
        raise TpucError(f"-p: {_one_line(exc)} in {_spec_context(exc)}") from None
    except ValueError as exc:  # an unknown pass in -p
        raise TpucError(str(exc)) from None
    source = driver.args.input_file or "<stdin>"
    try:
        driver.run()
    except ParseError as exc:
        from tpuc.ir.module_io import parse_error_message

        raise TpucError(f"{source}: invalid IR: {parse_error_message(exc)}") from None
    except DiagnosticException as exc:
        raise TpucError(f"{source}: {_one_line(exc)}") from None
    except FileNotFoundError as exc:
        raise TpucError(f"{exc.filename}: no such file") from None
    except IsADirectoryError as exc:  # xDSL opens the input itself
        raise TpucError(f"{exc.filename}: is a folder, not a .mlir file") from None
    except PermissionError as exc:
        raise TpucError(f"{exc.filename}: permission denied") from None
    except ValueError as exc:
        if "file extension" in str(exc):
            raise TpucError(f"{source}: {exc}") from None
        raise
    return 0


def _spec_context(exc: BaseException) -> str:
    """The pipeline text an ArgSpecParseError points into."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"'{lines[-3].strip()}'" if len(lines) >= 3 else "the pipeline"


def main(argv: Sequence[str] | None = None) -> None:
    run_cli(lambda: _main(argv))


if __name__ == "__main__":
    main()
