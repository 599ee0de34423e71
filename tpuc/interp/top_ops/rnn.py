"""LSTM and GRU of the TOP dialect: the op's attributes become the kernel
library's `Recurrent` record (`tpuc.kernels.rnn`)."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import library
from tpuc.kernels import rnn as lib


def recurrent_record(op) -> lib.Recurrent:
    return lib.Recurrent(
        int(op.value("hidden_size") or 0),
        bool(op.value("batch_first")),
        bool(op.value("linear_before_reset")),
    )


library(top.LSTMOp, recurrent_record, lib.lstm)
library(top.GRUOp, recurrent_record, lib.gru)
