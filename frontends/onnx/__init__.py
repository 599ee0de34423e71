"""ONNX -> TOP frontend: `convert_onnx(model_path, model_name, input_shapes,
output_names)` returns the TOP_F32 module and its float32 weights."""

from tpuc.frontends.onnx.converter import convert_onnx

__all__ = ["convert_onnx"]
