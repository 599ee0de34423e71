"""LiteRT (`ai-edge-litert`) as the reference for TFLite models: its
reference kernels (not the XNNPACK delegate), with every intermediate
tensor kept so model_transform can compare each tensor TOP also has.

Inputs and results are in the model's own layout (NHWC) and real values (a
quantized input is quantized with its scale and zero point, quantized
results are dequantized); `run_tflite`
returns arrays keyed by TFLite tensor name, or — given `keys` (TOP name ->
(TFLite tensor index, is NCHW)) — keyed by TOP name and transposed to TOP's
layout where TOP keeps the tensor NCHW.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from tpuc.base.errors import TpucError


def _interpreter(path: str, dump_all: bool, reference_kernels: bool = True):
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError as exc:
        raise TpucError(
            "running a .tflite model needs LiteRT: pip install 'tpuc[tflite]' (ai-edge-litert)"
        ) from exc
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Interpreter(
                model_path=path,
                experimental_op_resolver_type=(
                    OpResolverType.BUILTIN_REF if reference_kernels else OpResolverType.BUILTIN
                ),
                experimental_preserve_all_tensors=dump_all,
            )
    except (ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TpucError(f"{path}: LiteRT cannot load the model ({reason})") from None


def run_tflite(
    path: str,
    inputs: Mapping[str, np.ndarray],
    dump_all: bool = False,
    keys: Mapping[str, tuple[int, bool]] | None = None,
    notes: Callable[[str], None] | None = None,
) -> dict[str, np.ndarray]:
    """Run the model on `inputs` (by input tensor name, model layout).
    A custom op the reference kernels lack (MediaPipe's
    Convolution2DTransposeBias is in LiteRT's XNNPACK delegate only) makes
    it run with the default kernels and delegate instead; tensors inside
    the delegated part then have no value to compare."""
    keep = dump_all or keys is not None
    try:
        interp = _invoke(path, _interpreter(path, keep), inputs)
    except _CustomOpMissing as exc:
        if notes is not None:
            notes(f"{exc}; running LiteRT's default kernels and XNNPACK delegate instead")
        interp = _invoke(path, _interpreter(path, keep, reference_kernels=False), inputs)
    if keys is not None:
        return _by_top_name(interp, keys, notes)
    wanted = interp.get_tensor_details() if dump_all else interp.get_output_details()
    out: dict[str, np.ndarray] = {}
    for d in wanted:
        value = _tensor(interp, d["index"])
        value = None if value is None else real_value(value, d.get("quantization_parameters"))
        if value is not None:
            out[d["name"]] = value
    return out


def _stored(value: np.ndarray, detail: dict) -> np.ndarray:
    """An input as the model stores it: real values of a quantized input
    are quantized with its scale and zero point (TOP takes real values)."""
    dtype = np.dtype(detail["dtype"])
    quant = detail.get("quantization_parameters") or {}
    scales = quant.get("scales")
    if dtype.kind not in "iu" or value.dtype.kind != "f" or scales is None or len(scales) != 1:
        return value.astype(dtype)
    info = np.iinfo(dtype)
    q = np.round(value.astype(np.float64) / float(scales[0])) + float(quant["zero_points"][0])
    return np.clip(q, info.min, info.max).astype(dtype)


class _CustomOpMissing(Exception):
    pass


def _invoke(path: str, interp, inputs: Mapping[str, np.ndarray]):
    import warnings

    details = interp.get_input_details()
    for d in details:
        if d["name"] not in inputs:
            raise TpucError(f"{path}: no input array named '{d['name']}'")
        shape = np.asarray(inputs[d["name"]]).shape
        if tuple(shape) != tuple(d["shape"]):
            interp.resize_tensor_input(d["index"], list(shape))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # preserve_all_tensors' debugging-only notice
            interp.allocate_tensors()
        for d in details:
            interp.set_tensor(d["index"], _stored(np.asarray(inputs[d["name"]]), d))
        interp.invoke()
    except (ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "unresolved custom op" in reason:
            raise _CustomOpMissing(reason.rstrip(".")) from None
        raise TpucError(f"{path}: LiteRT failed to run the model ({reason})") from None
    return interp


def _tensor(interp, index: int) -> np.ndarray | None:
    try:
        return np.array(interp.get_tensor(index))
    except ValueError:  # a tensor LiteRT did not keep (constants folded away ...)
        return None


def real_value(value: np.ndarray, quant: dict | None) -> np.ndarray | None:
    """A float tensor as is, a per-tensor quantized one dequantized."""
    if value.dtype.kind == "f":
        return value.astype(np.float32)
    scales = (quant or {}).get("scales")
    if value.dtype.kind not in "iu" or scales is None or len(scales) != 1:
        return None
    zp = float(quant["zero_points"][0])
    return ((value.astype(np.float64) - zp) * float(scales[0])).astype(np.float32)


def _by_top_name(interp, keys, notes) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    missing = 0
    quant = {d["index"]: d.get("quantization_parameters") for d in interp.get_tensor_details()}
    for top_name, (index, nchw) in keys.items():
        value = _tensor(interp, index)
        value = None if value is None else real_value(value, quant.get(index))
        if value is None:
            missing += 1
            continue
        if nchw and value.ndim == 4:
            value = value.transpose(0, 3, 1, 2)
        out[top_name] = value
    if missing and notes is not None:
        notes(f"{missing} tensor(s) have no float value in LiteRT")
    return out
