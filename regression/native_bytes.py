#!/usr/bin/env python3
"""Command bytes of two native bmodels, group by group: tpuc's against TPU-MLIR's.

For the same op and parameters the vendor library writes the same commands,
so where the two compilers also agree on the addresses the streams are
byte-identical; where they do not, the counts and sizes still agree and the
differing bytes are the address fields. Prints, per command group, the TIU
and GDMA command counts and byte sizes of both, and whether the bytes match.

    python regression/native_bytes.py tpuc.target.bmodel tpumlir.bmodel
"""

from __future__ import annotations

import sys
from pathlib import Path

from tpuc.target.bmodel.native import read_native_commands
from tpuc.target.vendor.fetch import locate


def differing(a: bytes, b: bytes) -> int | str:
    """Bytes that differ between two streams of one size (else 'all')."""
    if len(a) != len(b):
        return "all"
    return sum(x != y for x, y in zip(a, b, strict=True))


def main(argv: list[str] | None = None) -> int:
    ours_path, theirs_path = (argv or sys.argv[1:])[:2]
    fbs = locate().bmodel_fbs
    ours = read_native_commands(Path(ours_path).read_bytes(), fbs, ours_path)
    theirs = read_native_commands(Path(theirs_path).read_bytes(), fbs, theirs_path)
    same = 0
    print(f"groups: {len(ours)} vs {len(theirs)}")
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        equal = a.bdc == b.bdc and a.gdma == b.gdma
        same += equal
        verdict = "identical" if equal else (
            f"differ in {differing(a.bdc, b.bdc)} TIU and {differing(a.gdma, b.gdma)} GDMA bytes"
        )  # fmt: skip
        print(f"group {i}: tiu {a.bdc_num}/{b.bdc_num} ({len(a.bdc)}/{len(b.bdc)} B), gdma "
              f"{a.gdma_num}/{b.gdma_num} ({len(a.gdma)}/{len(b.gdma)} B): {verdict}")  # fmt: skip
    print(f"{same} of {max(len(ours), len(theirs))} groups byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
