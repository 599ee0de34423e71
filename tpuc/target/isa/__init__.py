"""tpuc's instruction set for its simulated chips (documented in docs/isa.md).

`records` holds the fixed-size record formats, `params` the attribute
encoding, `opcodes` the numbering, `types` the IR-type <-> dtype mapping.
Codegen writes these records; `tpuc.target.runtime` reads and executes them.
"""
