// Malformed groups: tpuc-opt reports one `error:` line and exits 1 (the
// file itself, a well-formed group of two H slices, verifies: OK).
// RUN: tpuc-opt %s | filecheck %s --check-prefix=OK
// RUN: sed 's/timesteps = 2/timesteps = 1/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=TS
// RUN: sed 's/stage = 2 : i64/stage = 3 : i64/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=STAGE
// RUN: sed 's/hsecs = 2/hsecs = 3/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=SECS
// RUN: sed 's/(3, 5)/(3, 0)/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=EMPTY
// RUN: sed 's/, lg = #tpu.local<.*>>}/}/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=NOLG
// RUN: sed 's/Yield"(%[a-z]*)/Yield"(%a)/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=YIELD
// RUN: sed 's/"tpu.Relu"(%l)/"tpu.Relu"(%x)/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=NOLOAD
// RUN: sed 's/"tpu.Load"(%x)/"tpu.Load"(%arg0)/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=OPERAND
// RUN: sed 's/ts = 0 : i64, stage = 0/ts = 0 : i64, stage = 0, held/' %s | not tpuc-opt 2>&1 | filecheck %s --check-prefix=SYNTAX

// OK: "tpu.Group"(%x)
// TS: error: <stdin>: tpu.Group: tpu.Relu 'a': timestep 1 outside [0, 1)
// TS-NOT: Traceback
// STAGE: error: <stdin>: tpu.Group: tpu.Store: stage 3 outside [0, 3)
// SECS: error: <stdin>: tpu.Group: tpu.Load: slices per axis (1, 2, 1) differ from the group's n, h, w slice counts (1, 3, 1)
// EMPTY: error: {{.*}}tpu.slices: axis h has slice (3, 0): offsets must be >= 0 and sizes > 0
// NOLG: error: <stdin>: tpu.Group: tpu.Relu 'a' has no `lg = #tpu.local<...>`
// YIELD: error: <stdin>: tpu.Group: tpu.Yield must yield the group's tpu.Store results
// NOLOAD: error: <stdin>: tpu.Group: tpu.Relu 'a' reads a global value without a tpu.Load
// OPERAND: error: <stdin>: tpu.Group: tpu.Load loads a value that is not a group operand
// SYNTAX: error: {{.*}}invalid IR: line {{[0-9]+}}:{{[0-9]+}}:
// SYNTAX-NOT: Traceback

builtin.module {
  func.func @main(%arg0: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    %g = "tpu.Group"(%x) ({
      %l = "tpu.Load"(%x) {ts = 0 : i64, stage = 0 : i64, addr = 0 : i64, size = 256 : i64, slices = #tpu.slices<n = [(0, 1)], h = [(0, 5), (3, 5)], w = [(0, 8)]>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
      %a = "tpu.Relu"(%l) {name = "a", lg = #tpu.local<ts = 1, stage = 1, addr = 256, size = 256, slices = #tpu.slices<n = [(0, 1)], h = [(0, 4), (4, 4)], w = [(0, 8)]>>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
      %stored = "tpu.Store"(%a) {ts = 1 : i64, stage = 2 : i64, slices = #tpu.slices<n = [(0, 1)], h = [(0, 4), (4, 4)], w = [(0, 8)]>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
      "tpu.Yield"(%stored) : (tensor<1x4x8x8xf32>) -> ()
    }) {nsecs = 1 : i64, hsecs = 2 : i64, wsecs = 1 : i64, stages = 3 : i64, timesteps = 2 : i64, cycles = 0 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    func.return %g : tensor<1x4x8x8xf32>
  }
}
