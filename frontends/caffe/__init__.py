"""Caffe -> TOP frontend: `convert_caffe(prototxt, caffemodel, model_name,
input_shapes, output_names)` returns the TOP_F32 module, its float32
weights and the TOP names of every layer's tops."""

from tpuc.frontends.caffe.converter import convert_caffe

__all__ = ["convert_caffe"]
