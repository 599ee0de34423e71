"""The kernel library: the chip's arithmetic on numpy arrays, without IR.

Each kernel family takes a frozen parameter record (geometry, quantization
of operands and result, requant epilogue, …) and arrays, so the TPU
interpreter (records built from ops, `tpuc.interp.tpu_ops.params`) and
the device simulator (records built from decoded commands) run the same
code. Modules here import numpy and the no-IR base of tpuc only (an import
contract checks it).
"""
