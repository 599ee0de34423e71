"""tpuc.ir.module_io loaders: every broken .mlir is one TpucError that keeps
xDSL's reason, and no input reaches the interpreters half-checked."""

from __future__ import annotations

import pytest
from mlir_texts import GOOD, MESSAGES, broken_files

from tpuc.base.errors import TpucError
from tpuc.ir.module_io import load_module, parse_module


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_broken_module_is_one_error(tmp_path, key):
    path = broken_files(tmp_path)[key]
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == f"{path}: {MESSAGES[key]}"


def test_good_module_loads():
    module = parse_module(GOOD, "m.mlir")
    assert module.ops.first is not None


def test_unreadable_module(tmp_path, monkeypatch):
    path = tmp_path / "m.mlir"
    path.write_text(GOOD)
    monkeypatch.setattr(type(path), "read_bytes", _denied)  # chmod 0 does not stop root
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == f"{path}: permission denied"


def test_folder_is_not_a_module(tmp_path):
    with pytest.raises(TpucError) as info:
        load_module(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a folder, not a .mlir file"


def _denied(path):
    raise PermissionError(13, "Permission denied", str(path))


def _conv_files(folder, weight_shape=(16, 16, 3, 3), text=None, dtype="float32"):
    import numpy as np
    from mlir_texts import CONV

    np.savez(folder / "c_weight.npz", w=np.zeros(weight_shape, dtype))
    (folder / "c.mlir").write_text(text or CONV)
    return folder / "c.mlir"


def test_conv_module_loads(tmp_path):
    module, store = load_module(_conv_files(tmp_path))
    assert store["w"].shape == (16, 16, 3, 3)


def test_weight_with_another_shape_than_declared(tmp_path):
    path = _conv_files(tmp_path, weight_shape=(16, 144))
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == (
        f"{tmp_path / 'c_weight.npz'}: weight 'w' has shape [16, 144], "
        "the module declares [16, 16, 3, 3]"
    )


@pytest.mark.parametrize("dtype", ["int64", "float64", "int32", "float16"])
def test_weight_of_another_dtype_than_declared(tmp_path, dtype):
    """int64 or int32 data would pass through the float kernels unnoticed
    (TPU-MLIR's reader refuses a size mismatch); none is converted."""
    path = _conv_files(tmp_path, dtype=dtype)
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == (
        f"{tmp_path / 'c_weight.npz'}: weight 'w' holds {dtype} values, "
        "the module declares f32 (stored as float32)"
    )


@pytest.mark.parametrize(
    "element, allowed",
    [
        ("f32", ["float32"]),
        ("f16", ["float16"]),
        ("bf16", ["uint16"]),  # bit patterns, as TPU-MLIR stores them
        ("si8", ["int8"]),
        ("ui8", ["uint8"]),
        ("i32", ["int32", "uint32"]),  # signless: either
        ("si64", ["int64"]),
        ("!quant.uniform<u8:f32, 0.5:3>", ["uint8"]),
    ],
)
def test_stored_dtypes_per_element_type(element, allowed):
    from xdsl.parser import Parser

    from tpuc.ir.context import make_context
    from tpuc.ir.weights import stored_dtypes

    element_type = Parser(make_context(), element).parse_type()
    assert [str(d) for d in stored_dtypes(element_type)] == allowed


def test_kernel_shape_that_contradicts_the_filter(tmp_path):
    from mlir_texts import CONV

    path = _conv_files(
        tmp_path, text=CONV.replace("kernel_shape = [3, 3]", "kernel_shape = [5, 5]")
    )
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == (
        f"{path}: invalid IR: top.Conv 'conv': kernel_shape [5, 5] does not match the filter's "
        "[3, 3]"
    )
