"""What `model_tool --info / --weight / --print` show about a bmodel tree.

The text follows TPU-MLIR 1.30.2's model_tool line for line (so scripts
that read its output read tpuc's), plus one line naming the instruction
set: tpuc's own (run by tpuc's device simulator) or the chip's native
command streams (run by the vendor runtime). Memory sizes follow its
definitions (weight: distinct coefficient blocks; instruct: the command
streams of every static TPU subnet; runtime: the largest stage's
activations, per net when a net has several subnets), with one
correction: TPU-MLIR counts stage 0's commands and activations for every
stage of a net, tpuc counts each stage's own.
"""

from __future__ import annotations

import hashlib
import json

from tpuc.target.bmodel.native import PAYLOAD_ALIGN
from tpuc.target.bmodel.tree import BmodelTree, Payload

RULE = "=" * 42
STAGE_RULE = "-" * 12
# Tensor.data_type codes as TPU-MLIR's model_tool names them
TYPE_NAMES = (
    "float32", "float16", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "bfloat16", "int4", "uint4",
)  # fmt: skip
KERNEL_MODES = {0: "normal", 1: "rvti"}


def type_name(code: int) -> str:
    return TYPE_NAMES[code] if 0 <= code < len(TYPE_NAMES) else "unkown"


def shape_text(tensor: dict, dynamic: bool) -> str:
    dims = tensor["shape"][0]["dim"] if tensor.get("shape") else []
    if not dims:
        return "[ ]"
    prefix = "max:" if dynamic else ""
    return "[" + ", ".join(f"{prefix}{d}" for d in dims) + "]"


def tensor_line(tensor: dict, output: bool, dynamic: bool = False) -> str:
    return (
        f"{'output' if output else 'input'}: {tensor['name']}, {shape_text(tensor, dynamic)}, "
        f"{type_name(tensor.get('data_type', 0))}, scale: {tensor.get('scale', 1.0):g}, "
        f"zero_point: {tensor.get('zero_point', 0)}"
    )


def instruction_set(tree: BmodelTree) -> str:
    if tree.native:
        return (
            f"instruction set: {tree.root.get('chip')} native command streams "
            "(runs in the vendor runtime)"
        )
    return "instruction set: tpuc (tpuc's own ISA; runs in tpuc's device simulator)"


def describe(tree: BmodelTree) -> str:
    """The text of `model_tool --info`."""
    root = tree.root
    lines = [f"bmodel version: {root.get('type')}.{root.get('version')}"]
    chip = f"chip: {root.get('chip')}"
    if root.get("device_num", 0) > 1:
        chip += f",  device num: {root['device_num']}"
    lines += [chip, f"create time: {root.get('time')}", instruction_set(tree)]
    module = root.get("kernel_module")
    if module is None:
        lines.append("no kernel_module")
    else:
        lines += [
            f"kernel_module name: {module['file_name']}",
            f"kernel_module size: {len(module['binary'].data)}",
            f"kernel mode: {KERNEL_MODES.get(module.get('mode', 0), module.get('mode'))}",
        ]
    for index, net in enumerate(tree.nets):
        lines += _net_lines(index, net)
    lines.append("")
    lines += memory_lines(tree)
    lines.append(f"bmodel is {'' if aligned(tree) else 'not '}4k aligned")
    return "\n".join(lines) + "\n"


def _net_lines(index: int, net: dict) -> list[str]:
    params = net.get("parameter", [])
    if not params:
        return []
    dynamic = params[0].get("is_dynamic", 0) != 0
    lines = [RULE, f"net {index}: [{net['name']}]  {'dynamic' if dynamic else 'static'}"]
    if net.get("addr_mode"):
        lines.append(f"addr mode: {net['addr_mode']}")
    if "cascade" in net:
        lines.append(f"device id: {net['cascade'].get('device_id', 0)}")
    for s, param in enumerate(params):
        lines += [STAGE_RULE, f"stage {s}, core num: {param.get('core_num') or 1}"]
        if len(param.get("sub_net", [])) > 1:
            lines.append(f"subnet number: {len(param['sub_net'])}")
        stage_dynamic = bool(param.get("n_dynamic") or param.get("h_w_dynamic"))
        lines += [tensor_line(t, False, stage_dynamic) for t in param.get("input_tensor", [])]
        lines += [tensor_line(t, True) for t in param.get("output_tensor", [])]
    return lines


def memory_lines(tree: BmodelTree) -> list[str]:
    sizes = memory(tree)
    device = sizes["weight"] + sizes["instruct"] + sizes["runtime"]
    host = sizes["host_weight"] + sizes["host_runtime"]
    return [
        f"device mem size: {device} (weight: {sizes['weight']}, instruct: "
        f"{sizes['instruct']}, runtime: {sizes['runtime']})",
        f"host mem size: {host} (weight: {sizes['host_weight']}, runtime: {sizes['host_runtime']})",
    ]


def memory(tree: BmodelTree) -> dict[str, int]:
    """Device and host memory the runtime needs for the whole bmodel."""
    sizes = dict.fromkeys(("weight", "instruct", "runtime", "host_weight", "host_runtime"), 0)
    coeffs: set[bytes] = set()
    host_consts: set[bytes] = set()
    shared_neurons = 0
    for net in tree.nets:
        largest, several = 0, False
        for param in net.get("parameter", []):
            largest = max(largest, param.get("ctx_size", 0))
            subnets = param.get("sub_net", [])
            several = several or len(subnets) > 1
            coeff = param.get("coeff_mem")
            if coeff is not None and _first_time(coeff, "binary_coeff", coeffs):
                sizes["weight"] += len(coeff["binary_coeff"].data)
            for subnet in subnets:
                sizes["instruct"] += _subnet_commands(subnet)
                for cpu in subnet.get("cpu_param", []) if subnet.get("subnet_mode") == 1 else []:
                    for const in cpu.get("cpu_const", []):
                        if _first_time(const, "const_data", host_consts):
                            sizes["host_weight"] += len(const["const_data"].data)
            sizes["host_runtime"] += param.get("cpu_mem_size", 0) * 4
        if several:
            sizes["runtime"] += largest
        else:
            shared_neurons = max(shared_neurons, largest)
    sizes["runtime"] += shared_neurons
    return sizes


def _subnet_commands(subnet: dict) -> int:
    if subnet.get("subnet_mode", 0) != 0:
        return 0
    if subnet.get("is_dynamic"):
        return subnet.get("ir_len", 0) * 4
    return sum(
        len(g["binary_bdc"].data if "binary_bdc" in g else b"")
        + len(g["binary_gdma"].data if "binary_gdma" in g else b"")
        for g in subnet.get("cmd_group", [])
    )


def _first_time(table: dict, binary: str, seen: set[bytes]) -> bool:
    """Whether a block (known by its check code, else its bytes) is new."""
    payload = table.get(binary)
    key = table.get("check_code") or hashlib.sha256(payload.data if payload else b"").digest()
    if key in seen:
        return False
    seen.add(key)
    return True


def payloads(value) -> list[Payload]:
    """Every payload of a tree (or part of one)."""
    if isinstance(value, Payload):
        return [value]
    if isinstance(value, dict):
        return [p for v in value.values() for p in payloads(v)]
    if isinstance(value, list):
        return [p for v in value for p in payloads(v)]
    return []


def aligned(tree: BmodelTree) -> bool:
    """Whether the blob and every payload start on a 4 KiB boundary of the file."""
    from tpuc.target.bmodel.container import HEADER_SIZE

    if (HEADER_SIZE + tree.flatbuffer_size) % PAYLOAD_ALIGN:
        return False
    return all(p.start % PAYLOAD_ALIGN == 0 for p in payloads(tree.root) if p.data)


def weights(tree: BmodelTree) -> str:
    """The text of `model_tool --weight`: each stage's coefficient locations."""
    lines = []
    for n, net in enumerate(tree.nets):
        for s, param in enumerate(net.get("parameter", [])):
            locations = (param.get("coeff_mem") or {}).get("location", [])
            if not locations:
                continue
            lines += [f'net {n} : "{net["name"]}", stage:{s}', "-" * 31]
            for loc in locations:
                start = loc.get("offset", 0)
                lines.append(f"{loc['name']} : [0x{start:x}, 0x{start + loc.get('size', 0):x})")
            lines.append(RULE)
    return "\n".join(lines) + ("\n" if lines else "")


def as_json(tree: BmodelTree) -> str:
    """The text of `model_tool --print`: every field, payloads as their range."""

    def plain(value):
        if isinstance(value, Payload):
            return {"start": value.start, "size": len(value.data)}
        if isinstance(value, bytes):
            return list(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return json.dumps(plain(tree.root), indent=2) + "\n"


__all__ = ["as_json", "describe", "memory", "weights"]
