"""The bmodel container: TPU-MLIR's deployable file format, written and read.

See container.py (file layout and the public functions), model.py (the
dataclasses) and bmodel.fbs (the flatbuffer schema, published field ids).
"""

from tpuc.target.bmodel.container import (
    DTYPE_BYTES,
    DTYPE_CODES,
    HEADER_SIZE,
    MAGIC,
    MODE_CODES,
    Binary,
    BModel,
    CmdGroup,
    CpuParam,
    Location,
    Net,
    NetParameter,
    SubNet,
    TensorDesc,
    bmodel_time,
    input_scale,
    load_bmodel_file,
    read_bmodel,
    write_bmodel,
)
from tpuc.target.bmodel.schema import FBS_PATH

__all__ = [
    "DTYPE_BYTES",
    "DTYPE_CODES",
    "FBS_PATH",
    "HEADER_SIZE",
    "MAGIC",
    "MODE_CODES",
    "Binary",
    "BModel",
    "CmdGroup",
    "CpuParam",
    "Location",
    "Net",
    "NetParameter",
    "SubNet",
    "TensorDesc",
    "input_scale",
    "bmodel_time",
    "load_bmodel_file",
    "read_bmodel",
    "write_bmodel",
]
