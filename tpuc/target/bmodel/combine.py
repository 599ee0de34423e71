"""Combine bmodels, split them, and take their kernel module out: on trees.

`combine` follows TPU-MLIR's `model_tool --combine`: nets are matched by
name; a net already present gains the new file's parameters as further
stages (the runtime picks the stage whose input shapes equal the input's),
other nets are appended. Every stage keeps its own coefficient and
activation addresses — the runtime places each stage's memory itself —
while the payloads (command streams, coefficients, kernel module) are laid
out again in the new file's blob, identical ones once: stages compiled
from the same weights share their coefficients. `neuron_size` becomes the
largest stage's activation size, the kernel module is the first file's
that has one.

One departure from TPU-MLIR: each net's stages are ordered by activation
size, largest first (a stable sort, so equal ones keep the files' order).
The vendor runtime 1.30.2 (chip model) runs a combined net wrongly — all
zeros or stale values — when stage 0 is not its largest: measured with
TPU-MLIR's own bmodels, combine and model_runner as with tpuc's. The
runtime picks the stage by input shape, so the order changes nothing else.

A stage joins a net only when it could be told apart and run in its place:
same kind of file and chip, same input and output names, data types and
quantization, a different input shape, the same static/dynamic kind. A
refusal names both files and what differs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from tpuc.base.dtypes import DTYPE_NAMES
from tpuc.base.errors import TpucError
from tpuc.target.bmodel.tree import BmodelTree, Payload


@dataclass(frozen=True)
class Source:
    """A tree and the file it came from (for messages)."""

    path: str
    tree: BmodelTree


def stage_shapes(param: dict, key: str = "input_tensor") -> list[tuple[int, ...]]:
    """The shapes of a stage's inputs (or outputs), in order."""
    return [tuple(t["shape"][0]["dim"]) if t.get("shape") else () for t in param.get(key, [])]


def _io_signature(param: dict, key: str) -> list[tuple]:
    """What must agree between stages of one net: names, types, quantization."""
    return [
        (
            t["name"],
            DTYPE_NAMES.get(t.get("data_type", 0), t.get("data_type")),
            t.get("scale", 1.0),
            t.get("zero_point", 0),
        )
        for t in param.get(key, [])
    ]


def _stage_conflict(old: dict, new: dict) -> str | None:
    """Why `new` cannot be another stage next to `old` (None: it can)."""
    for key, what in (("input_tensor", "inputs"), ("output_tensor", "outputs")):
        a, b = _io_signature(old, key), _io_signature(new, key)
        if a != b:
            return f"their {what} differ ({_describe(a)} vs {_describe(b)})"
    if stage_shapes(old) == stage_shapes(new):
        return f"both take inputs of shape {_shapes(stage_shapes(new))} (a stage needs its own)"
    for flag in ("is_dynamic", "n_dynamic", "h_w_dynamic"):
        if old.get(flag, 0) != new.get(flag, 0):
            return f"one is dynamic ({flag}) and the other is not"
    if (len(old.get("sub_net", [])) > 1) != (len(new.get("sub_net", [])) > 1):
        return "one has several subnets and the other one"
    return None


def _describe(signature: list[tuple]) -> str:
    return ", ".join(f"{n} {d} scale {s:g} zp {z}" for n, d, s, z in signature) or "none"


def _shapes(shapes: list[tuple[int, ...]]) -> str:
    return ", ".join(str(list(s)) for s in shapes)


def _check_same_target(sources: list[Source]) -> None:
    first = sources[0]
    for other in sources[1:]:
        if other.tree.kind != first.tree.kind:
            kinds = {
                s.path: "native" if s.tree.native else "tpuc's own ISA" for s in (first, other)
            }
            raise TpucError(
                f"cannot combine {first.path} ({kinds[first.path]}) with {other.path} "
                f"({kinds[other.path]}): one instruction set per bmodel"
            )
        chips = first.tree.root.get("chip"), other.tree.root.get("chip")
        if chips[0] != chips[1]:
            raise TpucError(
                f"cannot combine {first.path} ({chips[0]}) with {other.path} ({chips[1]}): "
                "one chip per bmodel"
            )


def _isa(tree: BmodelTree) -> str:
    return "native" if tree.native else "tpuc's own ISA"


def combine(sources: list[Source], time: str, version: str) -> BmodelTree:
    """One tree holding every net and stage of `sources`, in order."""
    if len(sources) < 2:
        raise TpucError("--combine needs at least two bmodel files")
    _check_same_target(sources)
    nets: list[dict] = []
    origin: dict[str, str] = {}  # net name -> file it first came from
    kernel = _Kernel()
    for source in sources:
        kernel.take(source)
        for net in source.tree.nets:
            params = net.get("parameter", [])
            if not params:
                continue
            present = next((n for n in nets if n["name"] == net["name"]), None)
            if present is None:
                nets.append(copy.copy(net) | {"parameter": list(params)})
                origin[net["name"]] = source.path
                continue
            _join(present, net, origin[net["name"]], source.path)
    for net in nets:
        net["parameter"] = sorted(net["parameter"], key=lambda p: -p.get("ctx_size", 0))
    first = sources[0].tree
    root = {
        "type": first.kind,
        "version": version,
        "time": time,
        "chip": first.root["chip"],
        "net": nets,
        "neuron_size": max(p.get("ctx_size", 0) for n in nets for p in n["parameter"]),
        "device_num": max(s.tree.root.get("device_num", 0) for s in sources),
    }
    if kernel.module is not None:
        root["kernel_module"] = kernel.module
    return BmodelTree(first.kind, first.tables, root)


def _join(present: dict, net: dict, first_path: str, path: str) -> None:
    """`net`'s stages appended to the combined net of the same name."""
    if present.get("addr_mode", 0) != net.get("addr_mode", 0):
        raise TpucError(
            f"cannot combine net '{net['name']}' of {path} with that of {first_path}: "
            "their addr_mode differs"
        )
    if "cascade" in present or "cascade" in net:
        raise TpucError(
            f"cannot combine net '{net['name']}' of {path}: a cascaded net has one stage"
        )
    for new in net["parameter"]:
        for index, old in enumerate(present["parameter"]):
            why = _stage_conflict(old, new)
            if why is not None:
                raise TpucError(
                    f"cannot add net '{net['name']}' of {path} as a stage next to stage "
                    f"{index} (from {first_path}): {why}"
                )
        present["parameter"].append(new)


class _Kernel:
    """The kernel module of the first file that has one (TPU-MLIR's choice)."""

    def __init__(self) -> None:
        self.module: dict | None = None
        self.path = ""

    def take(self, source: Source) -> None:
        module = source.tree.root.get("kernel_module")
        if module is None:
            return
        if self.module is None:
            self.module, self.path = module, source.path
            return
        if module.get("mode", 0) != self.module.get("mode", 0):
            raise TpucError(
                f"cannot combine {source.path} with {self.path}: their kernel modules run in "
                "different modes"
            )
        if module["binary"].data != self.module["binary"].data:
            print(
                f"note: {source.path} embeds another kernel module than {self.path}; "
                f"the combined bmodel keeps the one of {self.path}"
            )


def extract(tree: BmodelTree, time: str, version: str) -> list[tuple[int, int, BmodelTree]]:
    """One single-net, single-stage tree per (net, stage) of `tree`."""
    parts = []
    for n, net in enumerate(tree.nets):
        for s, param in enumerate(net.get("parameter", [])):
            one_net = copy.copy(net) | {"parameter": [param]}
            root = {
                key: value
                for key, value in tree.root.items()
                if key not in ("net", "neuron_size", "time", "version", "bmodel_type")
            }
            root |= {"time": time, "version": version, "net": [one_net]}
            root["neuron_size"] = param.get("ctx_size", 0)
            parts.append((n, s, BmodelTree(tree.kind, tree.tables, root)))
    return parts


def kernel_module(tree: BmodelTree, source: str) -> tuple[str, bytes]:
    """(file name, bytes) of the embedded kernel module."""
    module = tree.root.get("kernel_module")
    if module is None or not module["binary"].data:
        raise TpucError(f"{source}: no kernel module embedded")
    return module["file_name"], module["binary"].data


def without_kernel(tree: BmodelTree, source: str) -> BmodelTree:
    """`tree` with its kernel module removed."""
    kernel_module(tree, source)
    root = {key: value for key, value in tree.root.items() if key != "kernel_module"}
    return BmodelTree(tree.kind, tree.tables, root)


def with_kernel(tree: BmodelTree, name: str, data: bytes) -> BmodelTree:
    """`tree` with the kernel module `name` (added, or replacing the one there)."""
    module = dict(tree.root.get("kernel_module", {}))
    module |= {"file_name": name, "binary": Payload(data)}
    return BmodelTree(tree.kind, tree.tables, tree.root | {"kernel_module": module})


__all__ = [
    "Source",
    "combine",
    "extract",
    "kernel_module",
    "stage_shapes",
    "with_kernel",
    "without_kernel",
]
