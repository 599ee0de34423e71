"""Small helpers over tpuc's IR that every layer above the dialects uses.

`core` finds `func @main`, names tensors and reads element types; the other
modules hold the module's context, its files (`module_io`), its weights,
quantization parameters, the quantize table, FLOP counts and input
preprocessing. They depend on the dialects and nothing above them.
"""
