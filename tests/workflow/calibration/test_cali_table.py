"""The calibration table text format: TPU-MLIR's header, 7-decimal lines,
optional blocks, and a strict reader that names the bad line."""

from __future__ import annotations

import importlib.metadata

import pytest

from tpuc.base import cali_table as table_mod
from tpuc.base.cali_table import (
    CaliEntry,
    CaliTable,
    format_table,
    parse_table,
    read_table,
)
from tpuc.base.errors import TpucError

# The sample in tpu-mlir-facts.md §3 (written by tpu-mlir 1.30.2).
FACTS_SAMPLE = """\
# mlir version: …
# mlir: resnet18.mlir
# genetated time: 2026-11-21 18:03:07.078270
# quantization threshold calculation method: ['kl']
# histogram number: 2048
# sample number: 20
###
# tune number: 5
###
# op_name    threshold    min    max
input 0.9999903 -0.9999903 0.9999850
c1_Relu 3.8337710 -0.0000000 3.8337710
logits_Gemm 5.8321671 -4.3349452 5.8321671
"""

# The sample in the book chapter §2.3 (yolov5s), with the book's header.
BOOK_SAMPLE = """\
# generated time: 2022-08-10 10:21:33.123456
# histogram number: 2048
# sample number: 100
# tune number: 5
###
# op_name threshold min max
images 1.0000080 0.0000000 1.0000080
122_Conv 56.4281803 -102.5830231 97.6811752
124_Mul 38.1586478 -0.2784646 97.6811752
125_Conv 56.1447888 -143.7053833 122.0844193
127_Mul 116.7435987 -0.2784646 122.0844193
128_Conv 16.4931355 -87.9204330 7.2770605
130_Mul 7.2720342 -0.2784646 7.2720342
"""

SMALL = CaliTable(
    {
        "input": CaliEntry(0.9999903, -0.9999903, 0.999985),
        "c1_Relu": CaliEntry(3.833771, -0.0, 3.833771),
        "/backbone/conv.0/Conv_output_0": CaliEntry(12.5, -7.25, 12.5),
    }
)

SMALL_TEXT = """\
# mlir version: tpuc 9.9.9
# mlir: net.mlir
# quantization threshold calculation method: ['kl']
# histogram number: 2048
# sample number: 20
###
# tune number: 5
###
# op_name    threshold    min    max
input 0.9999903 -0.9999903 0.9999850
c1_Relu 3.8337710 0.0000000 3.8337710
/backbone/conv.0/Conv_output_0 12.5000000 -7.2500000 12.5000000
"""


@pytest.fixture
def fixed_version(monkeypatch):
    monkeypatch.setattr(table_mod, "_version", lambda: "9.9.9")


def write(table: CaliTable, **overrides) -> str:
    args = dict(mlir="/some/dir/net.mlir", methods=["kl"], histogram_bins=2048, samples=20)
    args.update(tune_num=5)
    args.update(overrides)
    return format_table(table, **args)


# --- writing --------------------------------------------------------------------------


def test_exact_text(fixed_version):
    assert write(SMALL) == SMALL_TEXT


def test_generated_time_line_only_when_given(fixed_version):
    text = write(SMALL, generated="2026-01-02 03:04:05", methods=["kl", "max"], tune_num=0)
    lines = text.splitlines()
    assert lines[2] == "# genetated time: 2026-01-02 03:04:05"  # TPU-MLIR's spelling
    assert lines[3] == "# quantization threshold calculation method: ['kl', 'max']"
    assert lines[7] == "# tune number: 0"
    assert "genetated" not in write(SMALL)


def test_version_line_uses_the_installed_package():
    expected = importlib.metadata.version("tpuc")
    assert write(SMALL).splitlines()[0] == f"# mlir version: tpuc {expected}"


def test_deterministic():
    assert write(SMALL) == write(SMALL)
    copy = CaliTable(dict(SMALL.entries))
    assert write(copy).encode() == write(SMALL).encode()


def test_seven_decimals_and_negative_zero(fixed_version):
    entries = {
        "a": CaliEntry(1e-5, -1e-9, 0.0),  # -1e-9 prints as -0.0000000 -> 0.0000000
        "b": CaliEntry(1234.56789012, -0.00000006, 1234.56789012),
    }
    body = write(CaliTable(entries)).splitlines()[-2:]
    assert body == [
        "a 0.0000100 0.0000000 0.0000000",
        "b 1234.5678901 -0.0000001 1234.5678901",
    ]


def test_round_trip_to_seven_decimals():
    entries = {
        f"layer_{i}/out:0": CaliEntry(0.1 + i * 1.2345678901, -i * 0.987654321, 0.1 + i * 1.23)
        for i in range(20)
    }
    parsed = parse_table(write(CaliTable(entries)), "t.txt")
    assert list(parsed.entries) == list(entries)  # network order kept
    for name, entry in entries.items():
        got = parsed.get(name)
        for field in ("threshold", "min", "max"):
            assert getattr(got, field) == pytest.approx(getattr(entry, field), abs=5.1e-8)


def test_blocks_round_trip(fixed_version):
    table = CaliTable(
        {"x": CaliEntry(2.0, -1.0, 2.0), "y": CaliEntry(3.0, 0.0, 3.0)},
        weight_scales={"conv1_weight": [0.000123456789, 0.5, 2.0]},
        int4_thresholds={"x": CaliEntry(1.5, -1.7142857, 1.5)},
        asym_ops=["y"],
    )
    text = write(table)
    assert text.endswith(
        "x 2.0000000 -1.0000000 2.0000000\n"
        "y 3.0000000 0.0000000 3.0000000\n"
        "#int4_th\n"
        "x 1.5000000 -1.7142857 1.5000000\n"
        "#weight_scale\n"
        "conv1_weight 3 0.000123456789 0.5 2.0\n"
        "#asym_op\n"
        "y\n"
    )
    parsed = parse_table(text, "t.txt")
    assert parsed.entries == table.entries
    assert parsed.weight_scales == table.weight_scales  # exact: scales keep every digit
    assert parsed.int4_thresholds == table.int4_thresholds
    assert parsed.asym_ops == ["y"]


@pytest.mark.parametrize(
    ("name", "entry", "message"),
    [
        ("has space", CaliEntry(1.0, 0.0, 1.0), "cannot be written"),
        ("#x", CaliEntry(1.0, 0.0, 1.0), "cannot be written"),
        ("", CaliEntry(1.0, 0.0, 1.0), "cannot be written"),
        ("t", CaliEntry(float("nan"), 0.0, 1.0), "tensor 't': threshold is not finite"),
        ("t", CaliEntry(0.0, 0.0, 1.0), "tensor 't': threshold must be positive"),
        ("t", CaliEntry(1.0, 2.0, 1.0), "tensor 't': min is larger than max"),
    ],
)
def test_format_refuses_what_cannot_be_read_back(name, entry, message):
    with pytest.raises(TpucError, match=message):
        write(CaliTable({name: entry}))


# --- reading ----------------------------------------------------------------------------


def test_tpu_mlir_sample_from_facts():
    table = parse_table(FACTS_SAMPLE, "resnet18_cali_table")
    assert list(table.entries) == ["input", "c1_Relu", "logits_Gemm"]
    assert table.get("input") == CaliEntry(0.9999903, -0.9999903, 0.999985)
    assert table.get("c1_Relu") == CaliEntry(3.833771, 0.0, 3.833771)
    assert table.get("logits_Gemm") == CaliEntry(5.8321671, -4.3349452, 5.8321671)
    assert table.header[1] == "# mlir: resnet18.mlir"
    assert len(table.header) == 10
    assert "c1_Relu" in table and "nope" not in table and len(table) == 3
    assert table.get("nope") is None


def test_tpu_mlir_sample_from_book():
    table = parse_table(BOOK_SAMPLE, "yolov5s_cali_table")
    assert len(table) == 7
    assert table.get("124_Mul") == CaliEntry(38.1586478, -0.2784646, 97.6811752)
    assert table.get("128_Conv").max == 7.2770605


def test_reader_tolerates_spacing_blank_lines_and_crlf():
    text = "# hdr\r\n\r\n  a\t1.5   -1  1.5  \r\n\nb/c:0.d 2 0 2\r\n"
    table = parse_table(text, "t.txt")
    assert table.entries == {"a": CaliEntry(1.5, -1.0, 1.5), "b/c:0.d": CaliEntry(2.0, 0.0, 2.0)}
    assert table.header == ["# hdr"]


def test_mqbench_blocks():
    # MQBench writes `#int4_th` then `#weight_scale` with zero points after the scales.
    text = (
        "# op_name    threshold    min    max\n"
        "conv1 4.0 -4.0 4.0\n"
        "#int4_th\n"
        "conv1 3.5 -4.0 3.5\n"
        "#weight_scale\n"
        "conv1_weight 2 0.0100000 0.0200000 2 0 0\n"
        "fc_weight 1 0.5\n"
        "#asym_op\n"
        "conv1\n"
    )
    table = parse_table(text, "qat.txt")
    assert table.entries == {"conv1": CaliEntry(4.0, -4.0, 4.0)}
    assert table.int4_thresholds == {"conv1": CaliEntry(3.5, -4.0, 3.5)}
    assert table.weight_scales == {"conv1_weight": [0.01, 0.02], "fc_weight": [0.5]}
    assert table.asym_ops == ["conv1"]


GOOD = "# op_name    threshold    min    max\nok 1.0 -1.0 1.0\n"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("a 1.0 -1.0", "expected 4 fields 'name threshold min max', got 3"),
        ("a 1.0 -1.0 1.0 7", "expected 4 fields 'name threshold min max', got 5"),
        (
            "a122_conv56.4281803 -102.5830231",
            "expected 4 fields 'name threshold min max', got 2",
        ),  # the book's OCR damage
        ("a one -1.0 1.0", "threshold 'one' is not a number"),
        ("a 1.0 - 1.0", "min '-' is not a number"),
        ("a 1.0 -1.0 1.0x", "max '1.0x' is not a number"),
        ("a nan -1.0 1.0", "threshold is not finite"),
        ("a 1.0 -inf 1.0", "min is not finite"),
        ("a 0.0000000 -1.0 1.0", "threshold must be positive"),
        ("a -2.0 -1.0 1.0", "threshold must be positive"),
        ("a 1.0 2.0 1.0", "min is larger than max"),
    ],
)
def test_malformed_line_names_its_number(line, problem):
    with pytest.raises(TpucError) as err:
        parse_table(GOOD + "\n" + line + "\n", "cali.txt")
    assert str(err.value) == f"cali.txt:4: {problem}: '{line}'"


def test_duplicate_names_both_lines():
    with pytest.raises(TpucError) as err:
        parse_table(GOOD + "x 1 0 1\nok 2 0 2\n", "cali.txt")
    assert str(err.value) == "cali.txt:4: 'ok' is listed twice (lines 2 and 4): 'ok 2 0 2'"


def test_same_name_in_main_and_int4_blocks_is_fine_but_not_twice_in_one_block():
    table = parse_table(GOOD + "#int4_th\nok 0.5 -0.5 0.5\n", "t")
    assert table.int4_thresholds["ok"].threshold == 0.5
    with pytest.raises(TpucError, match=r"t:5: 'ok' is listed twice in the #int4_th block"):
        parse_table(GOOD + "#int4_th\nok 0.5 -0.5 0.5\nok 0.5 -0.5 0.5\n", "t")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("w", "expected 'name N s1 .. sN' with a count N >= 1"),
        ("w two 0.1 0.2", "expected 'name N s1 .. sN' with a count N >= 1"),
        ("w 0", "expected 'name N s1 .. sN' with a count N >= 1"),
        ("w ² 0.1 0.2", "expected 'name N s1 .. sN' with a count N >= 1"),
        ("w 1 0.1 x 0", "expected 1 scale(s) after the count, got 3"),
        ("w 3 0.1 0.2", "expected 3 scale(s) after the count, got 2"),
        ("w 2 0.1 0.2 0.3", "expected 2 scale(s) after the count, got 3"),
        ("w 2 0.1 x", "scale 'x' is not a number"),
        ("w 1 inf", "a scale is not finite"),
    ],
)
def test_malformed_weight_scale_line(line, problem):
    with pytest.raises(TpucError) as err:
        parse_table(GOOD + "#weight_scale\n" + line + "\n", "cali.txt")
    assert str(err.value) == f"cali.txt:4: {problem}: '{line}'"


def test_malformed_asym_op_line():
    with pytest.raises(TpucError) as err:
        parse_table(GOOD + "#asym_op\nconv1 conv2\n", "cali.txt")
    assert str(err.value) == "cali.txt:4: expected one op name, got 2 fields: 'conv1 conv2'"


def test_unsupported_block_is_refused():
    with pytest.raises(TpucError) as err:
        parse_table(GOOD + "#tpu-mlir-fp8\nok 1 -1 1\n", "cali.txt")
    assert str(err.value) == (
        "cali.txt:3: the #tpu-mlir-fp8 block is not supported by tpuc: '#tpu-mlir-fp8'"
    )


def test_read_table(tmp_path):
    path = tmp_path / "net_cali_table"
    path.write_text(FACTS_SAMPLE, encoding="utf-8")
    assert len(read_table(path)) == 3
    assert len(read_table(str(path))) == 3


def test_read_table_errors(tmp_path):
    missing = tmp_path / "nope_cali_table"
    with pytest.raises(TpucError, match=rf"^calibration table {missing}: no such file$"):
        read_table(missing)
    with pytest.raises(TpucError, match="is a folder, not a file"):
        read_table(tmp_path)
    binary = tmp_path / "bin_table"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TpucError, match=rf"^calibration table {binary}: not a text file$"):
        read_table(binary)
    bad = tmp_path / "bad_table"
    bad.write_text(GOOD + "oops\n")
    with pytest.raises(TpucError, match=rf"^{bad}:3: expected 4 fields"):
        read_table(bad)


def test_read_table_with_bom(tmp_path):
    path = tmp_path / "bom_table"
    path.write_bytes(b"\xef\xbb\xbf" + FACTS_SAMPLE.encode())
    assert read_table(path).header[0] == "# mlir version: …"
