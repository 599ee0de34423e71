"""tpu.Lut on records (no IR): indices from the input's qmin, per-channel
tables on axis 1, results rounded to the output's float type."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.base.errors import TpucError
from tpuc.kernels.element import F32, Element, quantized
from tpuc.kernels.lut import Lut, lut

I8 = quantized("i8", 0.1, 0, -128, 127)
U8 = quantized("u8", 0.1, 5, 0, 255)
I4 = quantized("i8", 0.1, 0, -8, 7)  # a narrowed storage range: 16 entries


def test_per_tensor_indexes_from_qmin():
    table = np.arange(256) * 2 - 300  # entry i = 2i - 300
    y = lut(Lut(I8, F32), np.array([-128, -1, 0, 127], np.float32), table)
    assert y.dtype == np.float32
    assert y.tolist() == [-300, -46, -44, 210]  # indices 0, 127, 128, 255
    y = lut(Lut(U8, F32), np.array([0, 255, 7], np.float32), table)  # Z does not shift the index
    assert y.tolist() == [-300, 210, -286]


def test_narrow_storage_needs_only_its_range():
    table = np.arange(16) * 10.0
    assert lut(Lut(I4, F32), np.array([-8, 0, 7], np.float32), table).tolist() == [0, 80, 150]


def test_per_channel_rows_and_output_rounding():
    table = np.stack([np.arange(256), 1000 + np.arange(256) + 0.5])  # [2, 256]
    x = np.array([[[-128, 0], [-128, 127]]], np.float32)  # [1, 2, 2]
    assert lut(Lut(I8, F32), x, table).tolist() == [[[0, 128], [1000.5, 1255.5]]]
    # bf16 spacing is 4 between 512 and 1024 and 8 above 1024: 1000.5 -> 1000, 1255.5 -> 1256
    assert lut(Lut(I8, Element("bf16")), x, table).tolist() == [[[0, 128], [1000, 1256]]]
    # f16 spacing 0.5 there: exact; 2049 (spacing 2 above 2048) ties to even 2048
    t16 = np.stack([np.full(256, 2049.0), np.full(256, 1000.5)])
    assert lut(Lut(I8, Element("f16")), x, t16).tolist() == [[[2048, 2048], [1000.5, 1000.5]]]


def test_quantized_output_holds_table_values():
    table = np.arange(256) - 128.0
    out = quantized("i8", 0.5, 0, -128, 127)
    assert lut(Lut(I8, out), np.array([-128, 127], np.float32), table).tolist() == [-128, 127]


def test_rejects_bad_tables_and_float_inputs():
    with pytest.raises(TpucError, match=r"table shape \[100\] is not \[256\] or \[C, 256\]"):
        lut(Lut(I8, F32), np.zeros(1, np.float32), np.zeros(100))
    with pytest.raises(TpucError, match="3 tables for input shape"):
        lut(Lut(I8, F32), np.zeros((1, 2), np.float32), np.zeros((3, 256)))
    with pytest.raises(TpucError, match="table shape"):
        lut(Lut(I8, F32), np.zeros(1, np.float32), np.zeros((2, 2, 256)))
    with pytest.raises(TpucError, match="must be quantized, not f16"):
        lut(Lut(Element("f16"), F32), np.zeros(1, np.float32), np.zeros(256))
