"""The chip-specific TPU dialect (see `ops` for the integer conventions)."""

from __future__ import annotations

from xdsl.ir import Dialect

from tpuc.dialects.tpu.ops import *  # noqa: F403  (the op classes)
from tpuc.dialects.tpu.ops import ACTIVE_MODES, MIRRORS, TPU_OPS, float_forms

Tpu = Dialect("tpu", TPU_OPS, [])

__all__ = ["ACTIVE_MODES", "MIRRORS", "TPU_OPS", "Tpu", "float_forms"]
