"""Caffe model -> TOP module: the driver and the helpers converters use.

`convert_caffe` parses both files, checks the whole request up front (input
shapes, every layer type has a converter), then converts the layers in
order. Every output shape is computed with Caffe's own rules by the layer's
converter (results carry static types; TOP's shape rules are not asked).

Blob names: Caffe lets a layer write the blob it reads (`top == bottom`,
in place). Each TOP value gets its own name, TPU-MLIR's way: the last
writer of blob `x` keeps `x`, earlier writers are `x/1`, `x/2`, ...; so a
comparison by name sees the value Caffe's `net.blobs['x']` ends with.
`layer_tensors` maps each Caffe layer to the TOP names of its tops (the
OpenCV reference is keyed by layer).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import PyValue, TensorOp, shape_of, tensor_type
from tpuc.frontends.builder import ModuleBuilder
from tpuc.frontends.caffe.model import (
    DATA_LAYERS,
    SKIPPED,
    CaffeNet,
    Layer,
    attach_blobs,
    load_net,
    read_caffemodel,
)
from tpuc.frontends.caffe.registry import IDENTITY, load_converters


def convert_caffe(
    prototxt: str,
    caffemodel: str | None,
    model_name: str,
    input_shapes: Sequence[Sequence[int]] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    net: CaffeNet | None = None,
) -> tuple[ModuleOp, dict[str, np.ndarray], dict[str, list[str]]]:
    """Convert a Caffe model to a TOP_F32 module, its float32 weights and
    the TOP names of each layer's tops."""
    if net is None:
        if caffemodel is None:
            raise TpucError(f"{prototxt}: a Caffe model needs its weights: pass --model_data")
        net = load_net(prototxt, None)
        scan_unsupported(net)  # before the weights are read: a model tpuc cannot convert fails fast
        attach_blobs(net, read_caffemodel(caffemodel), caffemodel)
    else:
        scan_unsupported(net)
    cv = CaffeConverter(net)
    cv.start(input_shapes)
    for layer in net.layers:
        cv.convert(layer)
    module = cv.finish(model_name, output_names)
    return module, cv.weights, cv.layer_tensors


def scan_unsupported(net: CaffeNet) -> None:
    """Every layer type without a converter, all in one line."""
    converters = load_converters()
    missing: dict[str, list[str]] = defaultdict(list)
    for layer in net.layers:
        known = layer.type in converters or layer.type in IDENTITY
        if not known and layer.type not in DATA_LAYERS | SKIPPED | {"Input"}:
            missing[layer.type].append(layer.name)
    if not missing:
        return
    parts = [
        f"{kind} (layer{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names[:4])}"
        f"{', ...' if len(names) > 4 else ''})"
        for kind, names in missing.items()
    ]
    raise TpucError(
        f"{net.path}: {len(missing)} layer type(s) tpuc cannot convert: {'; '.join(parts)}"
    )


class CaffeConverter(ModuleBuilder):
    """Conversion state: blob name -> current SSA value, plus the ops."""

    def __init__(self, net: CaffeNet):
        super().__init__()
        self.net = net
        self.values: dict[str, SSAValue] = {}
        self.converters = load_converters()
        self.layer_tensors: dict[str, list[str]] = {}
        self._writers = _writer_counts(net)
        self._written: dict[str, int] = defaultdict(int)

    # --- inputs and outputs --------------------------------------------------------

    def start(self, input_shapes: Sequence[Sequence[int]] | None) -> None:
        """Block arguments for legacy `input:` blobs and `Input` layers."""
        inputs = list(self.net.inputs)
        for layer in self.net.layers:
            if layer.type == "Input":
                shapes = [list(s.dim) for s in layer.param.input_param.shape]
                for i, name in enumerate(layer.tops):
                    shape = shapes[i] if i < len(shapes) else (shapes[0] if shapes else None)
                    inputs.append((name, shape))
        if not inputs:
            raise TpucError(f"{self.net.path}: the network has no input (Input layer or input:)")
        if input_shapes is not None:
            if len(input_shapes) != len(inputs):
                raise TpucError(
                    f"--input_shapes: {len(input_shapes)} shape(s) for {len(inputs)} input(s) "
                    f"({', '.join(n for n, _ in inputs)})"
                )
            inputs = [(n, list(s)) for (n, _), s in zip(inputs, input_shapes, strict=True)]
        for name, shape in inputs:
            if not shape or any(int(d) <= 0 for d in shape):
                raise TpucError(
                    f"{self.net.path}: input '{name}' has no usable shape ({shape}); "
                    "give --input_shapes"
                )
            arg = self.block.insert_arg(tensor_type(shape), len(self.block.args))
            op = top.InputOp.make([arg], self.unique_name(name), result_types=[tensor_type(shape)])
            self.block.add_op(op)
            self.values[name] = op.results[0]

    def finish(self, model_name: str, output_names: Sequence[str] | None) -> ModuleOp:
        names = list(output_names) if output_names else self._final_blobs()
        results = []
        for name in names:
            if name not in self.values:
                raise TpucError(f"--output_names: '{name}' is not a blob of {self.net.path}")
            results.append(self.values[name])
        return self.module(model_name, results, "CAFFE")

    def _final_blobs(self) -> list[str]:
        """Blobs no layer reads: Caffe's network outputs."""
        read = {b for layer in self.net.layers for b in layer.bottoms}
        outs: list[str] = []
        for layer in self.net.layers:
            for name in layer.tops:
                if name not in read and name not in outs and name in self.values:
                    outs.append(name)
        return outs

    # --- layers ----------------------------------------------------------------------

    def convert(self, layer: Layer) -> None:
        if layer.type in DATA_LAYERS | SKIPPED | {"Input"}:
            return
        for name in layer.bottoms:
            if name not in self.values:
                raise self.error(layer, f"bottom '{name}' is not produced by an earlier layer")
        if layer.type in IDENTITY:
            for bottom, name in zip(layer.bottoms * len(layer.tops), layer.tops, strict=False):
                self.values[name] = self.values[bottom]
            self.layer_tensors[layer.name] = [_name_of(self.values[t]) for t in layer.tops]
            return
        fn = self.converters.get(layer.type)
        assert fn is not None  # scan_unsupported checked every type
        fn(self, layer)
        self.layer_tensors[layer.name] = [_name_of(self.values[t]) for t in layer.tops]

    def error(self, layer: Layer, message: str) -> TpucError:
        return self.net.error(layer, message)

    def value(self, name: str) -> SSAValue:
        return self.values[name]

    def shape(self, name: str) -> tuple[int, ...]:
        shape = shape_of(self.values[name])
        assert shape is not None  # every Caffe value has a static shape
        return shape

    def emit(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        layer: Layer,
        attrs: Mapping[str, PyValue] | None,
        shape: Sequence[int],
        top_index: int = 0,
    ) -> SSAValue:
        """The op producing top `top_index` of `layer`, with its shape."""
        blob = layer.tops[top_index]
        op = cls.make(operands, self._top_name(blob), attrs, result_types=[tensor_type(shape)])
        self.block.add_op(op)
        self.values[blob] = op.results[0]
        return op.results[0]

    def emit_temp(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        base: str,
        attrs: Mapping[str, PyValue] | None,
        shape: Sequence[int],
    ) -> SSAValue:
        """An intermediate op tpuc adds (no Caffe blob of that name)."""
        op = cls.make(operands, self.unique_name(base), attrs, result_types=[tensor_type(shape)])
        self.block.add_op(op)
        return op.results[0]

    def blobs(self, layer: Layer, shapes: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """The layer's caffemodel blobs, checked against the shapes the
        prototxt implies (a legacy 4-D blob only needs the element count)."""
        have = layer.blobs
        if len(have) < len(shapes):
            where = "has no blobs" if not have else f"has {len(have)} blob(s)"
            raise self.error(
                layer, f"the caffemodel {where} for it; the prototxt needs {len(shapes)}"
            )
        out = []
        for i, want in enumerate(shapes):
            data, declared = have[i], layer.blob_shapes[i]
            want = [int(d) for d in want]
            fits = list(declared) == want if declared is not None else data.size == np.prod(want)
            if not fits or data.size != int(np.prod(want)):
                got = list(declared) if declared is not None else f"{data.size} values"
                raise self.error(
                    layer, f"caffemodel blob {i} has shape {got}, the prototxt implies {want}"
                )
            out.append(data.reshape(want))
        return out

    # --- names -----------------------------------------------------------------------

    def _top_name(self, blob: str) -> str:
        """`blob` for its last writer, `blob/k` for the k-th earlier one."""
        self._written[blob] += 1
        k, total = self._written[blob], self._writers.get(blob, 1)
        return self.unique_name(blob if k >= total else f"{blob}/{k}")


def _writer_counts(net: CaffeNet) -> dict[str, int]:
    """How many converted layers write each blob (identity layers write
    nothing: their top is the bottom's value)."""
    counts: dict[str, int] = defaultdict(int)
    for layer in net.layers:
        if layer.type in IDENTITY or layer.type in DATA_LAYERS | SKIPPED | {"Input"}:
            continue
        for name in layer.tops:
            counts[name] += 1
    return counts


def _name_of(value: SSAValue) -> str:
    op = value.owner
    assert isinstance(op, TensorOp)
    return op.tensor_name.data
