"""The machine a bmodel runs on, and nothing of the compiler's IR.

`chips` describes each chip as data, `cost` is tpuc's cycle model, `isa` is
tpuc's own instruction set, `runtime` its device simulator, `bmodel` the
flatbuffer container both codegen targets write, and `vendor` the worker
processes that drive the vendor's backend library and runtime (the native
target). The layer sits below the dialects, so none of it can reach the IR.
"""
