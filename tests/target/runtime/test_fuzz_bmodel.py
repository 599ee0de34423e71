"""A damaged bmodel never runs silently (issue 16, item 1): byte mutations of
an INT8 and an F16 bmodel either fail with one line naming the file or run
to the original's outputs; edits re-signed with fresh digests (what the
semantic checks must catch) never crash. Long campaigns:
regression/fuzz_bmodel.py."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from fuzz_bmodel import case_bytes, classify, run_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpuc.base.errors import TpucError
from tpuc.target.bmodel import HEADER_SIZE, read_bmodel, write_bmodel
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import split_commands
from tpuc.target.runtime.program import Program
from tpuc.tools import model_deploy

MODES = ("INT8", "F16")
LIMIT_SECONDS = 5.0


@pytest.fixture(scope="module")
def bmodels(prepared, tmp_path_factory):  # noqa: F811
    """mode -> (file bytes, inputs, the original's outputs)."""
    out = tmp_path_factory.mktemp("fuzz")
    found = {}
    inputs = dict(np.load(prepared / "in.npz"))
    for mode in MODES:
        path = out / f"cnn_{mode.lower()}.bmodel"
        argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", mode]
        argv += ["--model", str(path)]
        if mode == "INT8":
            argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
        assert model_deploy.run(argv) == 0
        data = path.read_bytes()
        status, reference = run_bytes(data, inputs)
        assert status == "ok", reference
        found[mode] = (data, inputs, reference)
    return found


def timed_outcome(data: bytes, inputs, reference) -> tuple[str, str]:
    start = time.perf_counter()
    outcome = classify(data, inputs, reference)
    assert time.perf_counter() - start < LIMIT_SECONDS
    return outcome


edits = st.lists(
    st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=4
)


@pytest.mark.parametrize("mode", MODES)
@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(edits=edits)
def test_byte_mutations_fail_cleanly_or_change_nothing(bmodels, mode, edits):
    data, inputs, reference = bmodels[mode]
    damaged = bytearray(data)
    for where, value in edits:
        damaged[int(where * len(damaged))] = value
    outcome, detail = timed_outcome(bytes(damaged), inputs, reference)
    assert outcome in ("error", "identical"), detail


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["raw", "resigned"])
def test_seeded_mutations(bmodels, mode, kind):
    """The regression script's mutations, 150 of each kind: re-signed edits
    may legitimately change outputs (another scale is another model)."""
    data, inputs, reference = bmodels[mode]
    allowed = ("error", "identical") if kind == "raw" else ("error", "identical", "changed")
    counts: dict[str, int] = {}
    for index in range(150):
        outcome, detail = timed_outcome(case_bytes(data, kind, 0, index), inputs, reference)
        assert outcome in allowed, f"case {index}: {outcome}: {detail}"
        counts[outcome] = counts.get(outcome, 0) + 1
    assert counts.get("error", 0) > 100  # the checks do reject damage


def expect_error(data: bytes, pattern: str) -> None:
    with pytest.raises(TpucError, match=pattern) as info:
        Program(read_bmodel(data, "m.bmodel"), "m.bmodel").run({})
    assert "\n" not in str(info.value)


def test_digests_name_what_changed(bmodels):
    data = bytearray(bmodels["INT8"][0])
    fb_size = int.from_bytes(data[8:12], "little")
    flat = bytearray(data)
    flat[HEADER_SIZE + fb_size // 2] ^= 0x10
    expect_error(bytes(flat), r"^m.bmodel: flatbuffer digest mismatch .* the file is corrupt$")
    model = read_bmodel(bytes(data), "m.bmodel")
    stream = model.nets[0].parameters[0].subnets[0].cmd_groups[0].bdc
    at = bytes(data).rfind(stream) + 40
    data[at] ^= 0x01
    expect_error(bytes(data), r"TIU commands: checksum mismatch \(sha256 .* corrupt$")
    tagged = bytearray(bmodels["INT8"][0])
    tagged[17] ^= 0x01
    expect_error(bytes(tagged), r"reserved bytes hold neither zeros nor a tpuc digest")


def test_files_without_digest_still_load(bmodels):
    """Other writers leave the reserved bytes zero and have no stream check codes."""
    data, inputs, reference = bmodels["F16"]
    bare = bytearray(data)
    bare[16:HEADER_SIZE] = bytes(HEADER_SIZE - 16)
    assert classify(bytes(bare), inputs, reference)[0] == "identical"


def resigned(data: bytes, edit) -> bytes:
    model = read_bmodel(data, "m.bmodel")
    edit(model.nets[0].parameters[0])
    return write_bmodel(model)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda p: setattr(p, "outputs", []), "the output tensor list is empty"),
        (lambda p: setattr(p, "subnets", []), "the subnet list is empty"),
        (lambda p: setattr(p.outputs[0], "shape", (1, 6)), r"output 'logits': size 20 bytes"),
        (
            lambda p: setattr(p.outputs[0], "device_addr", p.ctx_addr + p.ctx_size),
            r"output 'logits': \[0x[0-9a-f]+, 0x[0-9a-f]+\) lies outside the activations",
        ),
        (
            lambda p: setattr(p.subnets[0].cmd_groups[0], "bdc_num", 0),
            r"subnet 0 group 0: 0 TIU commands in \d+ bytes$",
        ),
        (lambda p: setattr(p, "ctx_size", p.ctx_size // 4), "lies outside"),
    ],
)
def test_incoherent_fields_fail_before_running(bmodels, edit, message):
    expect_error(resigned(bmodels["INT8"][0], edit), message)


def test_conv_with_huge_pads_fails_at_load(bmodels):
    """The result shape a TIU_CONV block implies is checked against its
    result record before anything is computed or allocated."""

    def huge_pads(param) -> None:
        group = param.subnets[0].cmd_groups[0]
        commands = split_commands(group.bdc, group.bdc_num, "bdc")
        conv = next(c for c in commands if c.header.opcode == isa.TIU_CONV)
        block = block_codec.decode_block(isa.TIU_CONV, conv.params)
        conv.params = block_codec.encode_block(
            isa.TIU_CONV, dataclasses.replace(block, pad_begins=(30000, 30000))
        )
        group.bdc = b"".join(c.pack() for c in commands)

    start = time.perf_counter()
    expect_error(
        resigned(bmodels["INT8"][0], huge_pads),
        r"TIU command \d+: result shapes \[\[1, 4, 8, 8\]\], but the parameters and operand "
        r"shapes give \[\[1, 4, 30007, 30007\]\]$",
    )
    assert time.perf_counter() - start < 1.0
