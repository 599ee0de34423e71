"""model_deploy.py --quant_input / --quant_output: the network keeps its
stored (int8/uint8, F16/BF16: f16/bf16) inputs and outputs instead of the
casts at its edges (tpuc.passes.strip_io_quant, TPU-MLIR's StripIOQuant).

As in TPU-MLIR the `_tpu.mlir` keeps its casts and is checked against TOP
with them; the casts go right before weight-reorder, so `_final.mlir` and
the bmodel have the stored types at their edges. The bmodel check then
feeds the same real test input (the runtime quantizes it with the bmodel's
input scale, as the removed Cast did) and compares each stripped output's
stored values with the TPU interpreter's tensor before its Cast, bit for
bit; `_model_outputs.npz` holds their real values (S·(q − Z)) under the
bmodel's output names, and `_tpu_outputs.npz` the interpreter's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tpuc.passes.strip_io_quant import Plan


@dataclass(frozen=True)
class QuantIO:
    """--quant_input / --quant_output and their index lists (1-based; empty: all)."""

    inputs: bool
    outputs: bool
    input_list: tuple[int, ...] = ()
    output_list: tuple[int, ...] = ()

    @staticmethod
    def parse(args, say: Callable[[str], None]) -> QuantIO | None:
        """None when neither flag is given (a list alone does nothing, as in
        TPU-MLIR: said in a warning)."""
        from tpuc.passes.strip_io_quant import parse_indices

        inputs = parse_indices(args.quant_input_list, "--quant_input_list")
        outputs = parse_indices(args.quant_output_list, "--quant_output_list")
        for given, flag, needs in (
            (inputs, "--quant_input_list", args.quant_input),
            (outputs, "--quant_output_list", args.quant_output),
        ):
            if given and not needs:
                say(f"warning: {flag} is ignored without {flag[: -len('_list')]}")
        if not (args.quant_input or args.quant_output):
            return None
        return QuantIO(bool(args.quant_input), bool(args.quant_output), inputs, outputs)


def check_lists(module, quant_io) -> None:
    """The lists' indices name inputs / outputs (before any work)."""
    from tpuc.passes.strip_io_quant import check_indices

    check_indices(module, quant_io.input_list, quant_io.output_list, "--")


def make_plan(module, quant_io, mode: str, say: Callable[[str], None]) -> Plan:
    """What will be stripped, said in one line, and a warning for each edge
    that keeps its cast (TPU-MLIR keeps those silently: an F32 network has
    no cast at its edges)."""
    from tpuc.passes.strip_io_quant import plan

    found = plan(
        module, quant_io.inputs, quant_io.outputs, quant_io.input_list, quant_io.output_list
    )
    stripped = [
        f"{'output' if e.output else 'input'} '{e.kept_name}' ({_type_text(e.element)})"
        for e in found.stripped()
    ]
    if stripped:
        say(f"strip-io-quant: the bmodel keeps {', '.join(stripped)}")
    for edge in found.kept():
        what = "output" if edge.output else "input"
        say(
            f"warning: --quant_{what}: {what} {edge.index} '{edge.name}' stays as it is in "
            f"{mode}: {edge.why}"
        )
    return found


def _type_text(element) -> str:
    from tpuc.dialects.quant import UniformQuantizedType

    if isinstance(element, UniformQuantizedType):
        return (
            f"{element.storage_dtype}, scale {element.scale:.6g}, zero point {element.zero_point}"
        )
    return str(element)


def keep_names(found: Plan | None) -> list[str]:
    """The TPU interpreter's tensors the bmodel check needs: the stored
    values of each stripped output (its Cast's operand)."""
    if found is None:
        return []
    return [e.stored_name for e in found.stripped() if e.output]


def strip(module, found: Plan | None) -> None:
    from tpuc.passes.strip_io_quant import strip as strip_module

    if found is not None and found.stripped():
        strip_module(module, found)


def stripped_outputs(found: Plan | None) -> dict[str, object]:
    """bmodel output name -> its element type, for each stripped output."""
    if found is None:
        return {}
    return {e.kept_name: e.element for e in found.stripped() if e.output}


def expected_values(
    real: Mapping[str, np.ndarray], stored: Mapping[str, np.ndarray], found: Plan | None
) -> dict[str, np.ndarray]:
    """What the bmodel's outputs must equal: real values, but the stored
    values of a stripped quantized output."""
    from tpuc.dialects.quant import UniformQuantizedType

    expected = dict(real)
    for name, element in stripped_outputs(found).items():
        if isinstance(element, UniformQuantizedType) and name in stored:
            expected[name] = stored[name]
    return expected


def real_outputs(outputs: Mapping[str, np.ndarray], found: Plan | None) -> dict[str, np.ndarray]:
    """The bmodel's outputs as real values: a stripped quantized output's
    stored integers dequantized with the TPU module's own type."""
    from tpuc.dialects.quant import UniformQuantizedType
    from tpuc.interp.tpu_ops.cast_ops import to_real

    real = dict(outputs)
    for name, element in stripped_outputs(found).items():
        if isinstance(element, UniformQuantizedType) and name in real:
            real[name] = np.asarray(to_real(np.asarray(real[name], np.float32), element))
    return real


def any_quantized_output(found: Plan | None) -> bool:
    from tpuc.dialects.quant import UniformQuantizedType

    return any(isinstance(e, UniformQuantizedType) for e in stripped_outputs(found).values())


__all__ = [
    "QuantIO",
    "any_quantized_output",
    "check_lists",
    "expected_values",
    "keep_names",
    "make_plan",
    "real_outputs",
    "strip",
    "stripped_outputs",
]
