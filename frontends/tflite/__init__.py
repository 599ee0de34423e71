"""TFLite -> TOP frontend: `convert_tflite(path, model_name, input_shapes,
output_names)` returns the TOP_F32 module (NCHW inside, the model's NHWC at
the inputs and outputs), its float32 weights and the map from TOP tensor
names to TFLite tensors for the LiteRT comparison."""

from tpuc.frontends.tflite.converter import convert_tflite

__all__ = ["convert_tflite"]
