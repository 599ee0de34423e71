"""TFLite model -> TOP module: the driver and the helpers converters use.

Layout: TFLite is channel-last; TOP is NCHW like every other frontend. Every
4-D tensor is kept NCHW inside the module: a 4-D graph input is taken in the
model's own NHWC layout (`top.Input` named after it) and permuted once, a
4-D graph output is permuted back to NHWC (that op carries the output's
name), and 4-D constants are transposed when they become weights. Ops whose
semantics depend on the layout (axes, padding, reshape) remap their
parameters; only a reshape/transpose that really reorders NHWC data goes
through an NHWC view. `ref_keys` maps each TOP tensor to the TFLite tensor
it equals (and whether it is that tensor transposed to NCHW), so
model_transform can compare every tensor both have against LiteRT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue

from tpuc.base.errors import TpucError, UnsupportedOpsError
from tpuc.dialects import top
from tpuc.dialects.base import PyValue, TensorOp, shape_of, tensor_type, to_attr
from tpuc.dialects.top.base import ReluFusedOp
from tpuc.dialects.top.shape_infer import infer_op_shapes
from tpuc.frontends.builder import ModuleBuilder
from tpuc.frontends.tflite.model import TModel, TOperator, load_tflite
from tpuc.frontends.tflite.registry import load_converters, load_folders

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)
NHWC_AXIS_TO_NCHW = (0, 2, 3, 1)  # NHWC axis a is NCHW axis NHWC_AXIS_TO_NCHW[a]

# fused activation functions: RELU, RELU_N1_TO_1, RELU6, TANH
ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
# TFLite's kernels of the ops with a fused activation (conv, depthwise, fully
# connected, add/sub/mul/div, pools, concat) clamp to CalculateActivationRange,
# which leaves TANH and SIGN_BIT unbounded: the model computes no activation
# there (measured with LiteRT 2.3.0, reference and optimized kernels), so
# tpuc follows the runtime that defines the model.
IGNORED_ACTS = ("TANH", "SIGN_BIT")


def convert_tflite(
    model_path: str,
    model_name: str,
    input_shapes: Sequence[Sequence[int]] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    model: TModel | None = None,
) -> tuple[
    ModuleOp, dict[str, np.ndarray], dict[str, tuple[int, bool]], dict[str, tuple[float, float]]
]:
    """Convert a .tflite file; see the module docstring for the layout.
    Returns the module, its weights, the TOP -> TFLite tensor map and, for a
    pre-quantized model, the real range of each quantized activation."""
    if model is None:
        model = load_tflite(model_path)
    check_float_model(model)
    shapes = resolve_input_shapes(model, input_shapes)
    outputs = resolve_outputs(model, output_names)
    ops = needed_ops(model, outputs)
    converters = load_converters()
    scan_unsupported(model, ops, converters)
    cv = TfliteConverter(model, trust_shapes=_same(model, shapes))
    cv.start(shapes)
    for op in ops:
        cv.convert(op)
    module = cv.finish(model_name, outputs)
    from tpuc.frontends.tflite.quant import tensor_ranges

    ranges = tensor_ranges(cv)
    if ranges:  # canonicalize then keeps the model's requantization points
        module.attributes["module.pre_quantized"] = to_attr(True)
    return module, cv.weights, cv.ref_keys, ranges


def _same(model: TModel, shapes: list[list[int]]) -> bool:
    return all(list(model.tensor(i).shape) == s for i, s in zip(model.inputs, shapes, strict=True))


def check_float_model(model: TModel) -> None:
    """Graph inputs and outputs are float, or per-tensor quantized (then TOP
    takes and gives their real values, as LiteRT's run in reference.py)."""
    for i in model.inputs + model.outputs:
        t = model.tensor(i)
        if t.type_name in ("FLOAT32", "FLOAT16"):
            continue
        if t.type_name in ("INT8", "UINT8", "INT16") and t.quantized and t.scales.size == 1:
            continue
        raise TpucError(
            f"{model.path}: graph {'input' if i in model.inputs else 'output'} '{t.name}' "
            f"is {t.type_name}{'' if t.quantized else ' without quantization parameters'}; "
            "tpuc converts float or per-tensor quantized inputs and outputs"
        )


def resolve_input_shapes(model: TModel, given: Sequence[Sequence[int]] | None) -> list[list[int]]:
    """Input shapes in the model's own layout (NHWC for images). A dynamic
    dim the file stores as -1 (TFLiteConverter stores 1 and keeps -1 in
    shape_signature) is 1 unless shapes are given."""
    tensors = [model.tensor(i) for i in model.inputs]
    if given is None:
        return [[d if d > 0 else 1 for d in t.shape] for t in tensors]
    if len(given) != len(tensors):
        names = ", ".join(t.name for t in tensors)
        raise TpucError(
            f"{model.path}: {len(given)} input shape(s) given for {len(tensors)} model input(s) "
            f"({names})"
        )
    out = []
    for t, shape in zip(tensors, given, strict=True):
        shape = [int(d) for d in shape]
        if len(shape) != len(t.shape):
            raise TpucError(
                f"{model.path}: input '{t.name}' has rank {len(t.shape)} but the given shape "
                f"{shape} has rank {len(shape)}"
            )
        if any(d <= 0 for d in shape):
            raise TpucError(f"{model.path}: input '{t.name}': shape {shape} must be positive")
        if len(shape) == 4 and shape[3] != t.shape[3]:
            raise TpucError(
                f"{model.path}: input '{t.name}' is NHWC {list(t.shape)}; the given shape "
                f"{shape} changes the channels (give --input_shapes in the model's NHWC layout)"
            )
        out.append(shape)
    return out


def resolve_outputs(model: TModel, names: Sequence[str] | None) -> list[int]:
    if not names:
        return list(model.outputs)
    by_name = {t.name: t.index for t in model.tensors}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise TpucError(f"{model.path}: unknown output name(s): {', '.join(unknown)}")
    return [by_name[n] for n in names]


def needed_ops(model: TModel, outputs: Sequence[int]) -> list[TOperator]:
    """Operators the outputs depend on, in a topological order."""
    producer = {o: op for op in model.operators for o in op.outputs}
    order: list[TOperator] = []
    state: dict[int, int] = {}
    for out in outputs:
        start = producer.get(out)
        if start is None or state.get(start.index) == 2:
            continue
        stack = [(start, iter(start.inputs))]
        state[start.index] = 1
        while stack:
            op, pending = stack[-1]
            for i in pending:
                dep = producer.get(i)
                if dep is None or state.get(dep.index) == 2:
                    continue
                if state.get(dep.index) == 1:
                    raise TpucError(f"{model.path}: the graph has a cycle through tensor #{i}")
                state[dep.index] = 1
                stack.append((dep, iter(dep.inputs)))
                break
            else:
                stack.pop()
                state[op.index] = 2
                order.append(op)
    return order


def scan_unsupported(model: TModel, ops: Sequence[TOperator], converters) -> None:
    """Raise `UnsupportedOpsError` naming every op that can be neither
    converted nor folded to a constant (custom ops by their custom code),
    then a one-line error for the first shape computation that reads data.
    Known here: constants, and what folds from them (any tensor's shape is)."""
    from tpuc.frontends.tflite.folding import unfoldable_error

    folders = load_folders()
    known = {t.index for t in model.tensors if t.data is not None}
    missing: dict[str, list[str]] = {}
    unfoldable: list[tuple[TOperator, int]] = []
    for op in ops:
        folder = folders.get(op.op)
        blocking = folder.blocking_input(op, known.__contains__) if folder else None
        if folder is not None and blocking is None:
            known.update(op.outputs)
            continue
        if op.op in converters:
            continue
        if folder is not None:
            unfoldable.append((op, blocking))
            continue
        label = model.tensor(op.outputs[0]).name if op.outputs else op.label
        missing.setdefault(op.op, []).append(label)
    if missing:
        raise UnsupportedOpsError(model.path, missing)
    if unfoldable:
        raise unfoldable_error(model, *unfoldable[0])


class TfliteConverter(ModuleBuilder):
    """Conversion state: TFLite tensor index -> SSA value (NCHW for 4-D)
    or constant array (TFLite layout), plus the TOP ops built so far."""

    def __init__(self, model: TModel, trust_shapes: bool = True):
        super().__init__()
        self.model = model
        self.path = model.path
        self.trust_shapes = trust_shapes
        self.values: dict[int, SSAValue] = {}
        self.nhwc_values: dict[int, SSAValue] = {}
        # TFLite tensor -> TOP value before a fused activation TOP cannot
        # fuse into the op (same scale in a pre-quantized model)
        self.pre_act: dict[int, SSAValue] = {}
        self.consts: dict[int, np.ndarray] = {
            t.index: _real(t) for t in model.tensors if t.data is not None
        }
        self.ref_keys: dict[str, tuple[int, bool]] = {}
        self.converters = load_converters()
        self.folders = load_folders()

    # --- building the function -------------------------------------------------

    def start(self, shapes: Sequence[Sequence[int]]) -> None:
        """A `top.Input` per graph input in the model's layout; 4-D inputs
        are permuted to NCHW once."""
        for index, shape in zip(self.model.inputs, shapes, strict=True):
            t = self.model.tensor(index)
            arg = self.block.insert_arg(tensor_type(shape), len(self.block.args))
            name = self.unique_name(t.name)
            op = top.InputOp.make([arg], name, result_types=[tensor_type(shape)])
            self.block.add_op(op)
            self.ref_keys[name] = (index, False)
            if len(shape) == 4:
                self.nhwc_values[index] = op.results[0]
                nchw = [shape[a] for a in TO_NCHW]
                self.values[index] = self.emit_temp(
                    top.PermuteOp, [op.results[0]], f"{t.name}_nchw", {"order": TO_NCHW}, nchw
                )
            else:
                self.values[index] = op.results[0]

    def convert(self, op: TOperator) -> None:
        """Fold `op` when every input it reads is known, else convert it."""
        from tpuc.frontends.tflite.folding import fold, unfoldable_error

        folder = self.folders.get(op.op)
        blocking = folder.blocking_input(op, self.consts.__contains__) if folder else None
        if folder is not None and blocking is None:
            for index, value in zip(op.outputs, fold(self, op, folder), strict=True):
                self.consts[index] = value
            return
        fn = self.converters.get(op.op)
        if fn is not None:
            fn(self, op)
        elif blocking is not None:
            raise unfoldable_error(self.model, op, blocking)
        else:  # scan_unsupported lists these first
            raise self.error(op, "tpuc neither converts nor folds this op")

    def finish(self, model_name: str, outputs: Sequence[int]) -> ModuleOp:
        """Return the requested tensors (4-D ones back in NHWC)."""
        results = [self.output_value(i) for i in outputs]
        return self.module(model_name, results, "TFLITE")

    def output_value(self, index: int) -> SSAValue:
        """A graph output in the model's layout, named after the tensor: the
        NCHW op that computed it is renamed `<name>_nchw`."""
        t = self.model.tensor(index)
        value = self.value(index)
        if len(shape_of(value) or ()) != 4:
            self._rename_output(value, t.name)
            return value
        if index in self.nhwc_values and isinstance(self.nhwc_values[index].owner, top.InputOp):
            return self.nhwc_values[index]
        owner = value.owner
        if isinstance(owner, TensorOp) and owner.tensor_name.data == t.name:
            new = self.unique_name(f"{t.name}_nchw")
            owner.attributes["name"] = StringAttr(new)
            self.ref_keys[new] = self.ref_keys.pop(t.name)
            self._names.discard(t.name)
        name = self.unique_name(t.name)
        nhwc = [shape_of(value)[a] for a in TO_NHWC]
        op = top.PermuteOp.make([value], name, {"order": TO_NHWC}, result_types=[tensor_type(nhwc)])
        self.block.add_op(op)
        self.ref_keys[name] = (index, False)
        return op.results[0]

    def _rename_output(self, value: SSAValue, name: str) -> None:
        """A forwarded output (DEQUANTIZE, CAST) is computed by an op named
        after another tensor: give that op the output's name."""
        owner = value.owner
        if not isinstance(owner, TensorOp) or isinstance(owner, top.InputOp | top.WeightOp):
            return
        if owner.result_names is not None or owner.tensor_name.data == name:
            return
        if name in self._names:
            return
        old = owner.tensor_name.data
        owner.attributes["name"] = StringAttr(name)
        self._names.add(name)
        if old in self.ref_keys:
            self.ref_keys[name] = self.ref_keys.pop(old)

    # --- helpers for converters ----------------------------------------------------

    def error(self, op: TOperator, message: str) -> TpucError:
        out = self.model.tensor(op.outputs[0]).name if op.outputs else "?"
        return TpucError(f"{self.path}: operator {op.label} ('{out}'): {message}")

    def tensor(self, index: int):
        return self.model.tensor(index)

    def rank(self, index: int) -> int:
        if index in self.consts:
            return self.consts[index].ndim
        value = self.values.get(index)
        if value is not None:
            return len(shape_of(value) or ())
        return len(self.model.tensor(index).shape)

    def shape(self, index: int) -> tuple[int, ...]:
        """The tensor's shape in the TFLite layout."""
        if index in self.consts:
            return tuple(self.consts[index].shape)
        value = self.values.get(index)
        if value is not None:
            shape = tuple(shape_of(value) or ())
            return tuple(shape[a] for a in TO_NHWC) if len(shape) == 4 else shape
        return tuple(self.model.tensor(index).shape)

    def const(self, index: int) -> np.ndarray | None:
        return self.consts.get(index) if index >= 0 else None

    def float_const(self, index: int, op: TOperator, what: str) -> np.ndarray:
        value = self.const(index)
        if value is None:
            raise self.error(op, f"{what} (tensor '{self.tensor(index).name}') must be a constant")
        return np.asarray(value, np.float32)

    def value(self, index: int) -> SSAValue:
        """The tensor as TOP sees it (4-D: NCHW); -1 is `top.None`."""
        if index < 0:
            return self.none()
        found = self.values.get(index)
        if found is not None:
            return found
        if index in self.consts:
            data = self.consts[index]
            if data.ndim == 4:
                data = data.transpose(TO_NCHW)
            found = self.weight(self.tensor(index).name, data)
            self.values[index] = found
            return found
        raise TpucError(f"{self.path}: tensor '{self.tensor(index).name}' is used before it is set")

    def nhwc(self, index: int) -> SSAValue:
        """The tensor in the TFLite layout (a 4-D activation gets an NHWC
        view once)."""
        found = self.nhwc_values.get(index)
        if found is not None:
            return found
        value = self.value(index)
        shape = shape_of(value) or ()
        if len(shape) != 4:
            return value
        nhwc = [shape[a] for a in TO_NHWC]
        base = f"{self.tensor(index).name}_nhwc"
        found = self.emit_temp(top.PermuteOp, [value], base, {"order": TO_NHWC}, nhwc)
        self.nhwc_values[index] = found
        return found

    def top_shape(self, index: int) -> list[int] | None:
        """The output's TOP shape from the file, when the file's shapes hold."""
        if not self.trust_shapes:
            return None
        shape = list(self.model.tensor(index).shape)
        return [shape[a] for a in TO_NCHW] if len(shape) == 4 else shape

    def emit(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        out: int,
        attrs: Mapping[str, PyValue] | None = None,
        act: int = 0,
        op: TOperator | None = None,
        nhwc: bool = False,
    ) -> SSAValue:
        """Build the TOP op computing TFLite tensor `out` with the fused
        activation `act`: RELU/RELU6 become the op's do_relu/relu_limit when
        it fuses ReLU, otherwise (and for RELU_N1_TO_1) an op after it.
        `nhwc`: the op works in the TFLite layout; a 4-D result is then
        permuted to NCHW."""
        attrs = dict(attrs or {})
        act_name = ACT_NAMES.get(act, str(act))
        if act_name in IGNORED_ACTS:
            act_name = "NONE"
        fuse = act_name in ("RELU", "RELU6") and issubclass(cls, ReluFusedOp)
        if fuse:
            attrs["do_relu"] = True
            attrs["relu_limit"] = 6.0 if act_name == "RELU6" else -1.0
        elif act_name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            raise self.error(op, f"fused activation {act_name} is not supported")  # type: ignore[arg-type]
        last = act_name == "NONE" or fuse
        name = self.tensor(out).name
        shape = self.top_shape(out)
        if nhwc and shape is not None and len(shape) == 4:
            shape = [shape[a] for a in TO_NHWC]
        if nhwc and self.rank(out) == 4:
            value = self.emit_temp(cls, operands, f"{name}_nhwc", attrs, shape)
            value = self.emit_temp(top.PermuteOp, [value], name, {"order": TO_NCHW})
            self.nhwc_values[out] = value.owner.operands[0]
        elif last:
            value = self.emit_temp(cls, operands, name, attrs, shape)
        else:
            value = self.emit_temp(cls, operands, f"{name}_{cls.name[4:]}", attrs, shape)
        if not last:
            self.pre_act[out] = value
            if act_name in ("RELU", "RELU6"):
                limit = 6.0 if act_name == "RELU6" else -1.0
                value = self.emit_temp(top.ReluOp, [value], name, {"relu_limit": limit})
            else:
                value = self.emit_temp(top.ClipOp, [value], name, {"min": -1.0, "max": 1.0})
        owner = value.owner
        assert isinstance(owner, TensorOp)
        self.ref_keys[owner.tensor_name.data] = (out, self.rank(out) == 4)
        self.values[out] = value
        return value

    def bind(self, out: int, value: SSAValue) -> None:
        """Make TFLite tensor `out` stand for an existing value."""
        self.values[out] = value

    def emit_temp(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        base: str,
        attrs: Mapping[str, PyValue] | None = None,
        shape: Sequence[int] | None = None,
    ) -> SSAValue:
        """An op named `base` (made unique)."""
        name = self.unique_name(base)
        op = cls.make(operands, name, attrs, result_types=[tensor_type(shape)])
        if shape is None:
            infer_op_shapes(op)
        self.block.add_op(op)
        return op.results[0]

    def fused_act(self, op: TOperator) -> int:
        opts = op.options
        return int(opts.FusedActivationFunction()) if opts is not None else 0


def _real(tensor) -> np.ndarray:
    """A constant's value: quantized integers (weights, int32 biases) as
    the real numbers they stand for; other data as stored."""
    if tensor.quantized and tensor.data.dtype.kind in "iu":
        from tpuc.frontends.tflite.folding import dequantize

        return dequantize(tensor, tensor.data)
    return tensor.data
