"""Reference execution of a Caffe model with OpenCV's Caffe importer.

tpuc has no pycaffe; `cv2.dnn.readNetFromCaffe` (opencv-python-headless
4.x: 5.0 removed the importer) is an independent implementation of the
same layers. Layer fusion is turned off so that BatchNorm, Scale and ReLU
outputs stay separate and every layer's output can be compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from tpuc.base.errors import TpucError


def load_opencv_net(prototxt: str, caffemodel: str):
    """The OpenCV network, fusion off, on OpenCV's own CPU backend."""
    try:
        import cv2
    except ImportError:
        raise TpucError(
            "the Caffe reference needs OpenCV: pip install 'opencv-python-headless<5'"
        ) from None
    if not hasattr(cv2.dnn, "readNetFromCaffe"):
        raise TpucError(
            f"OpenCV {cv2.__version__} has no Caffe importer (removed in 5.0): "
            "pip install 'opencv-python-headless<5'"
        )
    try:
        net = cv2.dnn.readNetFromCaffe(prototxt, caffemodel)
    except cv2.error as exc:
        raise TpucError(f"OpenCV cannot read {prototxt}: {_first_line(exc)}") from None
    net.enableFusion(False)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net


def run_caffe(
    prototxt: str,
    caffemodel: str,
    inputs: Mapping[str, np.ndarray],
    layers: Mapping[str, str] | None = None,
    *,
    dump_all: bool = False,
    notes: Callable[[str], None] | None = None,
) -> dict[str, np.ndarray]:
    """Run the model in OpenCV. Returns the network outputs by layer name;
    plus, with `layers` (Caffe layer name -> key in the result), those
    layers' first outputs, and with `dump_all` every layer's output."""
    net = load_opencv_net(prototxt, caffemodel)
    names = list(net.getLayerNames())
    wanted = dict(layers or {})
    if dump_all:
        wanted.update({n: n for n in names if n not in wanted})
    outs = [str(n) for n in net.getUnconnectedOutLayersNames()]
    for name in outs:
        wanted.setdefault(name, name)
    missing = [n for n in wanted if n not in names]
    if missing and notes is not None:
        notes(f"OpenCV exposes no output for {len(missing)} layer(s): {', '.join(missing[:5])}")
    keys = [n for n in wanted if n in names]
    for name, array in inputs.items():
        net.setInput(np.ascontiguousarray(array, np.float32), name)
    try:
        results = net.forward(keys)
    except Exception as exc:
        raise TpucError(f"OpenCV failed to run {prototxt}: {_first_line(exc)}") from None
    return {wanted[k]: np.asarray(v) for k, v in zip(keys, results, strict=True)}


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


class CaffeNames:
    """What model_transform's reference run needs of a Caffe model: the
    files and the TOP names of each layer's tops."""

    def __init__(self, prototxt: str, caffemodel: str, layer_tensors: Mapping[str, list[str]]):
        self.prototxt = prototxt
        self.caffemodel = caffemodel
        self.layer_tensors = dict(layer_tensors)

    def run_reference(
        self, inputs: Mapping[str, np.ndarray], top_names: set[str], say: Callable[[str], None]
    ) -> dict[str, np.ndarray]:
        """OpenCV's output of every layer whose first top TOP also has,
        keyed by the TOP name."""
        keys = {
            layer: names[0]
            for layer, names in self.layer_tensors.items()
            if names and names[0] in top_names
        }
        say(f"running OpenCV's Caffe importer on {self.prototxt} ({len(keys)} tensors to compare)")
        ref = run_caffe(self.prototxt, self.caffemodel, inputs, keys, notes=say)
        return {k: v for k, v in ref.items() if k in top_names}
