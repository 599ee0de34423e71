"""The native target: TPU ops -> the chip's own command streams, written by
the vendor's backend library (tpuc.target.vendor), as TPU-MLIR's codegen does.

`context` holds what every rule needs (addresses, tensor specs, the
coefficient region); `rules` the registry; one module per op family
(`conv`, `matmul`, `pool`, `binary`, `active`, `cast`, `data`) fills each
op's parameter struct the way TPU-MLIR's `Interfaces/BM1684X/<Op>.cpp` do;
`emit` runs the calls and writes the bmodel.
"""
