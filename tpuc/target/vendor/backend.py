"""The backend library in its worker: global ops in, command groups out.

Runs only inside a `tpuc.target.vendor.serve backend` process. The call order is
TPU-MLIR's for bm1684x (`BM168x::start_env`, `before_codegen`, one
`backend_api_*` call per op, `after_codegen`), and the commands are read
back per group from the library's instruction store. The library has an
unresolved reference to another chip's kernel (`nodechip_gru_bf16`), so it
is opened with libc's `dlopen` and lazy binding; ctypes would bind it at
once and fail.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

from tpuc.base.errors import TpucError
from tpuc.target.vendor.worker import COMMAND_MARK  # announces each group command in the log

GMEM_SIZE = 0x1_0000_0000
ENGINES = {"tiu": b"tiu:0:0", "gdma": b"gdma:0:0"}
PROFILE_NAME = "compiler_profile_0.txt"
_TOTAL = re.compile(r"TCYC\s*:\s*(\d+)")

_vp = ctypes.c_void_p
_uint_p = ctypes.POINTER(ctypes.c_uint)


def open_lazily(path: Path) -> ctypes.CDLL:
    """`path` opened with RTLD_LAZY | RTLD_GLOBAL through libc's dlopen."""
    libc = ctypes.CDLL(None)
    libc.dlopen.restype = _vp
    libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.dlerror.restype = ctypes.c_char_p
    handle = libc.dlopen(str(path).encode(), os.RTLD_LAZY | os.RTLD_GLOBAL)
    if not handle:
        raise TpucError(f"cannot load {path}: {libc.dlerror().decode(errors='replace')}")
    return ctypes.CDLL(str(path), handle=handle)


_MOVE_ARGS = [
    ctypes.c_int, ctypes.c_int, ctypes.c_uint64, *[ctypes.c_int] * 4, *[ctypes.c_uint32] * 8,
    ctypes.c_int, ctypes.c_int, ctypes.c_int, _vp,
]  # fmt: skip


_MATRIX_ARGS = [
    ctypes.c_uint32, ctypes.c_int, ctypes.c_uint64, *[ctypes.c_int] * 7, _vp,
]  # fmt: skip
"""general_matrix_move_gen_cmd(local_addr, npu_idx, sys_addr, cols_per_channel,
rows, cols, row_stride, format, direction, transpose, node)."""


_GENERAL_MOVE_ARGS = [
    ctypes.c_uint64, ctypes.c_int, *[ctypes.c_int] * 4, *[ctypes.c_uint32] * 4, ctypes.c_int,
    ctypes.c_uint64, ctypes.c_int, *[ctypes.c_int] * 4, *[ctypes.c_uint32] * 4,
    ctypes.c_int, ctypes.c_int, _vp,
]  # fmt: skip
"""tensor_general_move_gen_cmd: (src addr, src lane, src N/C/H/W, src strides, format, dst addr,
dst lane, dst N/C/H/W, dst strides, direction, transpose, node)."""


_CW_TRANS_ARGS = [
    ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64, ctypes.c_int, *[ctypes.c_int] * 5,
    *[ctypes.c_uint32] * 6, ctypes.c_int, ctypes.c_int, _vp,
]  # fmt: skip
"""general_cwtrans_gen_cmd: (src addr, src lane, dst addr, dst lane, src N/C/H/W, format,
src N/C/H strides, dst N/C/H strides, stride_enable, direction, node): [N, C, H, W]
to [N, W, H, C]."""


_BCAST_ARGS = [
    ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_int, *[ctypes.c_int] * 4,
    *[ctypes.c_uint32] * 4, ctypes.c_int, ctypes.c_int, ctypes.c_int, _vp,
]  # fmt: skip
"""tensor_broadcast_move_gen_cmd: (src, src lane, local addr, first lane, N, H, W, lanes,
src N/H strides, dst N/H strides, format, stride_enable, direction, node)."""


def _specs(tensors: list[bytes]) -> ctypes.Array:
    """tensor_spec_t[] of the specs' bytes (72 bytes each)."""
    return ctypes.create_string_buffer(b"".join(tensors) or b"\0", max(72 * len(tensors), 1))


def _pointer_patched(param: bytes, pointers: list[tuple[int, bytes]], keep: list) -> ctypes.Array:
    """The param bytes with each (offset, payload) pointer field aimed at a
    worker-side copy of the payload (structs that hold `int *` arrays)."""
    buffer = ctypes.create_string_buffer(param, len(param))
    for offset, payload in pointers:
        target = ctypes.create_string_buffer(payload, max(len(payload), 1))
        keep.append(target)
        ctypes.c_uint64.from_buffer(buffer, offset).value = ctypes.addressof(target)
    return buffer


class BackendSession:
    """The library, initialized once per process (it is not re-entrant)."""

    def __init__(self, lib_dir: str):
        self.lib = open_lazily(Path(lib_dir) / "libbackend_bm1684x.so")
        lib = self.lib
        lib.create_cmd_id_node.restype = _vp
        lib.backend_api_get_tpu_inst_group_number.restype = ctypes.c_uint
        lib.backend_api_get_tpu_inst_number_per_group.restype = _uint_p
        lib.backend_api_get_tpu_inst_size_per_group.restype = _uint_p
        lib.backend_api_get_tpu_inst_data.restype = ctypes.POINTER(ctypes.c_ubyte)
        lib.get_cmd_id_cycle.restype = ctypes.c_int64
        lib.cmodel_init(0, ctypes.c_uint64(GMEM_SIZE))
        self.cmdid, self.tiu, self.gdma = (_vp(lib.create_cmd_id_node()) for _ in range(3))
        lib.backend_api_set_core_info(0, 1)
        lib.allow_store_cmd()
        lib.forbid_atomic_cmodel()
        lib.load_lookup_tables()
        lib.enable_active_mode(True)
        lib.set_id_node(self.cmdid)
        lib.set_ts_fe_cmd_id_ptr(self.gdma, self.tiu)

    def begin(self, profile: bool) -> None:
        """Start a subnet (TPU-MLIR's before_codegen)."""
        lib = self.lib
        Path(PROFILE_NAME).unlink(missing_ok=True)  # the library opens it on the path call
        lib.sg_set_profile_dump(bool(profile))
        lib.allow_store_cmd()
        lib.sg_set_profile_path(b"./")
        for node in (self.cmdid, self.tiu, self.gdma):
            lib.reset_cmd_id(node)
        lib.backend_api_clear_tpu_inst_data()

    def call_global(
        self,
        name: str,
        function: str,
        param: bytes,
        pointers: list[tuple[int, bytes]],
        inputs: list[bytes],
        outputs: list[bytes],
    ) -> None:
        """`function(&param, sizeof param, inputs, outputs, cmdid)` for op `name`."""
        keep: list = []
        buffer = _pointer_patched(param, pointers, keep)
        specs = [
            ctypes.create_string_buffer(b"".join(t) or b"\0", max(72 * len(t), 1))
            for t in (inputs, outputs)
        ]
        self.lib.set_cmd_id_prefix(self.cmdid, name.encode())
        getattr(self.lib, function)(buffer, len(param), specs[0], specs[1], self.cmdid)

    def call_plain(
        self,
        name: str,
        function: str,
        param: bytes,
        pointers: list[tuple[int, bytes]],
        inputs: list[bytes],
        outputs: list[bytes],
    ) -> None:
        """`function(&param, sizeof param, cmdid)`: the older APIs whose struct
        holds the addresses itself (no tensor specs)."""
        keep: list = []
        buffer = _pointer_patched(param, pointers, keep)
        self.lib.set_cmd_id_prefix(self.cmdid, name.encode())
        getattr(self.lib, function)(buffer, len(param), self.cmdid)

    def general_move(self, name: str, args: tuple) -> None:
        """One GDMA command of a global layer, `tensor_general_move_gen_cmd`
        on the global cmd-id node (it waits for every earlier command)."""
        self.lib.set_cmd_id_prefix(self.cmdid, name.encode())
        self.lib.tensor_general_move_gen_cmd.argtypes = _GENERAL_MOVE_ARGS
        self.lib.tensor_general_move_gen_cmd(*args, self.cmdid)

    def cw_transpose(self, name: str, args: tuple) -> None:
        """One GDMA C/W transpose of a global layer, `general_cwtrans_gen_cmd`
        on the global cmd-id node."""
        self.lib.set_cmd_id_prefix(self.cmdid, name.encode())
        self.lib.general_cwtrans_gen_cmd.argtypes = _CW_TRANS_ARGS
        self.lib.general_cwtrans_gen_cmd(*args, self.cmdid)

    def run(self, commands: list[tuple]) -> int:
        """Commands of a layer group (`tpuc.passes.native.local.emit`), in
        order: ("local", name, function, param, pointers, sec_info, inputs,
        outputs), ("plain_local", name, function, param), ("move", name, args),
        ("general_move", name, args), ("cw_transpose", name, args),
        ("bcast", name, args),
        ("divide",), ("merge",) or a
        ("global", …) call; the cmd-id node's cycles they added."""
        before = self.lib.get_cmd_id_cycle(self.cmdid)
        for command in commands:
            self._command(command)
        return self.lib.get_cmd_id_cycle(self.cmdid) - before

    def _command(self, command: tuple) -> None:
        kind, rest = command[0], command[1:]
        lib = self.lib
        if rest:  # names the op in the log, should the library kill the process on it
            os.write(1, f"{COMMAND_MARK}{kind} of '{rest[0]}'\n".encode())
        if kind == "divide":
            lib.cmd_id_divide(self.cmdid, self.tiu, self.gdma)
        elif kind == "merge":
            lib.cmd_id_merge(self.cmdid, self.tiu, self.gdma)
        elif kind == "move":
            name, args = rest
            lib.set_cmd_id_prefix(self.gdma, name.encode())
            lib.tensor_stride_move_gen_cmd.argtypes = _MOVE_ARGS
            lib.tensor_stride_move_gen_cmd(*args, self.gdma)
        elif kind == "matrix":  # a [rows, cols] matrix, cols over the lanes (GDMA_MATRIX)
            name, args = rest
            lib.set_cmd_id_prefix(self.gdma, name.encode())
            lib.general_matrix_move_gen_cmd.argtypes = _MATRIX_ARGS
            lib.general_matrix_move_gen_cmd(*args, self.gdma)
        elif kind == "bcast":  # one plane from DDR to many lanes (TPU-MLIR's GDMA broadcast)
            name, args = rest
            lib.set_cmd_id_prefix(self.gdma, name.encode())
            lib.tensor_broadcast_move_gen_cmd.argtypes = _BCAST_ARGS
            lib.tensor_broadcast_move_gen_cmd(*args, self.gdma)
        elif kind == "local":
            name, function, param, pointers, sec_info, inputs, outputs = rest
            keep: list = []
            buffer = _pointer_patched(param, pointers, keep)
            specs = [_specs(t) for t in (inputs, outputs)]
            info = ctypes.create_string_buffer(sec_info, len(sec_info))
            lib.set_cmd_id_prefix(self.tiu, name.encode())
            getattr(lib, function)(buffer, len(param), info, specs[0], specs[1], self.tiu)
        elif kind == "plain_local":  # the older local APIs: (param, size, tiu node)
            name, function, param = rest
            lib.set_cmd_id_prefix(self.tiu, name.encode())
            buffer = ctypes.create_string_buffer(param, len(param))
            getattr(lib, function)(buffer, len(param), self.tiu)
        elif kind == "general_move":
            self.general_move(*rest)
        elif kind == "cw_transpose":
            self.cw_transpose(*rest)
        elif kind == "global":
            self.call_global(*rest)
        elif kind == "global_plain":
            self.call_plain(*rest)
        else:
            raise TpucError(f"unknown group command {kind!r}")

    def price(self, commands: list[tuple]) -> int:
        """The cycles of `commands` with issuing off (TPU-MLIR's
        CycleCalculator: nothing is stored, the chip model only counts), on
        freshly reset nodes; issuing is back on afterwards."""
        lib = self.lib
        lib.forbid_store_cmd()
        lib.forbid_atomic_cmodel()
        for node in (self.cmdid, self.tiu, self.gdma):
            lib.reset_cmd_id(node)
        try:
            return self.run(commands)
        finally:
            lib.sg_stas_reset()
            for node in (self.cmdid, self.tiu, self.gdma):
                lib.reset_cmd_id(node)
            lib.allow_store_cmd()

    def end(self) -> dict:
        """Finish the subnet (after_codegen): its command groups, and the
        profile's total cycles when profiling was on."""
        lib = self.lib
        lib.sg_stas_dump(self.cmdid)
        lib.store_cmd_end()
        lib.forbid_store_cmd()
        count = lib.backend_api_get_tpu_inst_group_number()
        streams = {engine: self._groups(key, count) for engine, key in ENGINES.items()}
        groups = []
        for (tiu_num, tiu), (gdma_num, gdma) in zip(streams["tiu"], streams["gdma"], strict=True):
            groups.append({"tiu_num": tiu_num, "tiu": tiu, "gdma_num": gdma_num, "gdma": gdma})
        ctypes.CDLL(None).fflush(None)  # the profile is a buffered FILE the library keeps open
        profile = Path(PROFILE_NAME)
        text = profile.read_text(errors="replace") if profile.exists() else ""
        cycles = sum(int(m) for m in _TOTAL.findall(text))
        return {"groups": groups, "profile": text, "cycles": cycles}

    def _groups(self, key: bytes, count: int) -> list[tuple[int, bytes]]:
        """(command count, bytes) of each group of one engine's store."""
        lib = self.lib
        numbers = lib.backend_api_get_tpu_inst_number_per_group(key)
        sizes = lib.backend_api_get_tpu_inst_size_per_group(key)
        data = lib.backend_api_get_tpu_inst_data(key)
        base = ctypes.addressof(data.contents) if count else 0
        offset, parts = 0, []
        for g in range(count):
            size = sizes[g]
            parts.append((numbers[g], ctypes.string_at(base + offset, size) if size else b""))
            offset += size
        return parts

    def close(self) -> None:
        pass


__all__ = ["BackendSession", "open_lazily"]
