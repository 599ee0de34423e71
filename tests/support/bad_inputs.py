"""Files that once made the tools print tracebacks (issue 16): ONNX models with
bad initializers, an image Pillow takes for a decompression bomb, an npz
with a member that is not an .npy."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def add_model(path: Path, initializer: onnx.TensorProto) -> Path:
    """y = x + W with x[1,4] float and the given initializer W."""
    nodes = [helper.make_node("Add", ["x", "W"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes,
        "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [initializer],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def string_initializer() -> onnx.TensorProto:
    return helper.make_tensor("W", TensorProto.STRING, [4], [b"a", b"b", b"c", b"d"])


def short_raw_initializer() -> onnx.TensorProto:
    """Float dims [4] (16 bytes) with 6 bytes of raw_data."""
    tensor = numpy_helper.from_array(np.ones(4, np.float32), "W")
    tensor.raw_data = tensor.raw_data[:6]
    return tensor


def int64_initializer(values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array([values], dtype=np.int64), "W")


def gif_bomb(path: Path) -> Path:
    """A valid 1x1 GIF whose header claims 65535x65535 pixels (4.3 G): Pillow
    refuses it with DecompressionBombError, whatever the file's suffix."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (1, 1)).save(buffer, "GIF")
    data = bytearray(buffer.getvalue())
    data[6:10] = struct.pack("<HH", 65535, 65535)
    descriptor = data.index(b"\x2c")
    data[descriptor + 5 : descriptor + 9] = struct.pack("<HH", 65535, 65535)
    path.write_bytes(bytes(data))
    return path


def npz_with_text_member(path: Path) -> Path:
    """A zip numpy opens as an npz, with a member that is no .npy."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.txt", "hello")
    return path
