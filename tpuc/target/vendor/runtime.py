"""The vendor runtime (bmrt) in its worker: run a native bmodel on the chip model.

Runs only inside a `tpuc.target.vendor.serve runtime` process, apart from the
backend library. The chip model (`libcmodel.so`) is opened first with
RTLD_GLOBAL, as the runtime expects of a cmodel build; then a device, a
runtime instance, the bmodel, one device buffer per input and output, the
launch, and every buffer freed before the runtime and the device (bmlib
asserts at exit otherwise).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from tpuc.base.errors import TpucError

MAX_DIMS = 8
_vp = ctypes.c_void_p


class DeviceMem(ctypes.Structure):
    """bm_device_mem_t (bmlib_runtime.h), passed by value."""

    _fields_ = [
        ("device_addr", ctypes.c_uint64),
        ("reserved", ctypes.c_uint32),
        ("dmabuf_fd", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
    ]


class Shape(ctypes.Structure):
    _fields_ = [("num_dims", ctypes.c_int32), ("dims", ctypes.c_int32 * MAX_DIMS)]


class Tensor(ctypes.Structure):
    """bm_tensor_t (bmruntime_interface.h)."""

    _fields_ = [
        ("dtype", ctypes.c_int32),
        ("shape", Shape),
        ("device_mem", DeviceMem),
        ("st_mode", ctypes.c_int32),
    ]


def _shape(dims: tuple[int, ...]) -> Shape:
    shape = Shape()
    shape.num_dims = len(dims)
    for i, d in enumerate(dims):
        shape.dims[i] = d
    return shape


class RuntimeSession:
    """One device and one runtime instance; bmodels are loaded per run."""

    def __init__(self, lib_dir: str):
        lib = Path(lib_dir)
        self.cmodel = ctypes.CDLL(str(lib / "libcmodel.so"), mode=os.RTLD_GLOBAL)
        self.bmlib = ctypes.CDLL(str(lib / "libbmlib.so.0"), mode=os.RTLD_GLOBAL)
        self.bmrt = ctypes.CDLL(str(lib / "libbmrt.so"), mode=os.RTLD_GLOBAL)
        self.bmrt.bmrt_create.restype = _vp
        self.bmrt.bmrt_create.argtypes = [_vp]
        self.bmrt.bmrt_load_bmodel.argtypes = [_vp, ctypes.c_char_p]
        self.bmrt.bmrt_load_bmodel.restype = ctypes.c_bool
        self.bmrt.bmrt_tensor.argtypes = [ctypes.POINTER(Tensor), _vp, ctypes.c_int32, Shape]
        self.bmrt.bmrt_tensor.restype = ctypes.c_bool
        self.bmrt.bmrt_launch_tensor_ex.argtypes = [
            _vp, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int,
            ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_bool, ctypes.c_bool,
        ]  # fmt: skip
        self.bmrt.bmrt_launch_tensor_ex.restype = ctypes.c_bool
        self.bmrt.bmrt_destroy.argtypes = [_vp]
        self.bmlib.bm_memcpy_s2d.argtypes = [_vp, DeviceMem, _vp]
        self.bmlib.bm_memcpy_d2s.argtypes = [_vp, _vp, DeviceMem]
        self.bmlib.bm_free_device.argtypes = [_vp, DeviceMem]
        self.bmlib.bm_thread_sync.argtypes = [_vp]
        self.bmlib.bm_dev_free.argtypes = [_vp]
        self.handle = _vp()
        if self.bmlib.bm_dev_request(ctypes.byref(self.handle), 0) != 0:
            raise TpucError("cannot open the chip model's device (bm_dev_request failed)")

    def run(
        self,
        bmodel: str,
        net: str,
        inputs: list[tuple[int, np.ndarray]],
        outputs: list[tuple[int, tuple[int, ...], str]],
    ) -> list[np.ndarray]:
        """Outputs of `net` of the bmodel file for `inputs` [(dtype code, array)];
        `outputs` lists (dtype code, shape, numpy dtype) of each output."""
        runtime = self.bmrt.bmrt_create(self.handle)
        if not runtime:
            raise TpucError("the vendor runtime could not start (bmrt_create)")
        tensors: list[Tensor] = []
        try:
            if not self.bmrt.bmrt_load_bmodel(runtime, bmodel.encode()):
                raise TpucError(f"{bmodel}: the vendor runtime refused the bmodel")
            ins = (Tensor * len(inputs))()
            outs = (Tensor * len(outputs))()
            for slot, (code, array) in zip(ins, inputs, strict=True):
                self._alloc(slot, runtime, code, array.shape, tensors)
                data = np.ascontiguousarray(array)
                self.bmlib.bm_memcpy_s2d(self.handle, slot.device_mem, data.ctypes.data)
            for slot, (code, shape, _) in zip(outs, outputs, strict=True):
                self._alloc(slot, runtime, code, shape, tensors)
            ok = self.bmrt.bmrt_launch_tensor_ex(
                runtime, net.encode(), ins, len(inputs), outs, len(outputs), True, False
            )
            if not ok:
                raise TpucError(f"{bmodel}: the vendor runtime could not launch net '{net}'")
            self.bmlib.bm_thread_sync(self.handle)
            results = []
            for slot, (_, shape, dtype) in zip(outs, outputs, strict=True):
                host = np.empty(shape, dtype=dtype)
                self.bmlib.bm_memcpy_d2s(self.handle, host.ctypes.data, slot.device_mem)
                results.append(host)
            return results
        finally:
            for tensor in tensors:
                self.bmlib.bm_free_device(self.handle, tensor.device_mem)
            self.bmrt.bmrt_destroy(runtime)

    def _alloc(self, slot: Tensor, runtime, code: int, shape, keep: list) -> None:
        if not self.bmrt.bmrt_tensor(ctypes.byref(slot), runtime, code, _shape(tuple(shape))):
            raise TpucError(f"cannot allocate a device tensor of shape {list(shape)}")
        keep.append(slot)

    def close(self) -> None:
        self.bmlib.bm_dev_free(self.handle)


__all__ = ["RuntimeSession"]
