"""Which runs of the TOP interpreter may use the onnxruntime accelerator.

tpuc's numpy kernels define TOP's float semantics: the TPU interpreter and
both codegen targets compute what they compute. The accelerator
(`tpuc/interp/ort/`) runs exportable ops as onnxruntime sessions of a
graph re-exported from TOP; it is faster for bulk runs, but the re-export
reads TOP's attributes the way the importer wrote them, so a check of the
importer against the framework made on it would let a misreading the two
share cancel out. Checks therefore run the kernels; only callers that run
many samples, or show numbers rather than judge them, take the accelerator.

`$TPUC_NATIVE` overrides the table for every caller: `0` runs the kernels
everywhere, `1` the accelerator everywhere (model_transform's check then
no longer tests the kernels: for timing only).
"""

from __future__ import annotations

import os

from tpuc.base.errors import TpucError

NATIVE_ENV = "TPUC_NATIVE"

ACCELERATED: dict[str, bool] = {
    # checks: the framework (or the TPU side) against tpuc's own kernels
    "model_transform": False,
    "model_deploy": False,
    "model_runner": False,
    # calibration measured faster on the kernels, and its tables stay the same
    # bytes (docs/tools.md; calibrate.interpreter asks this table);
    # mixed precision compares against calibration's runs
    "calibration": False,
    "mixed_precision": False,
    # bulk runs whose numbers are shown, not judged by tpuc
    "model_eval": True,
    "visual": True,
}
"""Caller -> whether its TOP runs take the accelerator by default."""


def accelerated(caller: str) -> bool:
    """Whether `caller`'s TOP interpreter runs use onnxruntime sessions:
    `$TPUC_NATIVE` (0 or 1) when set, else the caller's entry."""
    if caller not in ACCELERATED:
        raise TpucError(f"no accelerator policy for '{caller}' (tpuc/interp/accelerator.py)")
    override = os.environ.get(NATIVE_ENV, "").strip()
    if not override:
        return ACCELERATED[caller]
    if override not in ("0", "1"):
        raise TpucError(f"${NATIVE_ENV} must be 0 or 1, not '{override}'")
    return override == "1"
