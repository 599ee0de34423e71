"""The TOP interpreter's onnxruntime path: runs of TOP ops whose kernel-library
records have an ONNX form are executed as one onnxruntime session each
(its MLAS kernels are several times faster than numpy + BLAS for
convolutions), every TOP tensor still observable as a graph output.

`graph` holds the ONNX builder and the registry of export rules (keyed by
the kernel-library function an op runs), `rules` the rules, `segments`
the partition of a function body into runs and their sessions.
"""
