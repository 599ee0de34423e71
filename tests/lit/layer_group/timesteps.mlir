// The timestep table of a residual block whose input x is read by the first
// and the last op (cv183x; the group fits without slicing). Nearest
// assignment puts each load one row before its first reader and each store
// one row after its producer; the pipeline then moves the final store
// (stage 2) next to the first compute and the first loads (stage 0) next to
// the last compute, except x: the last op (a) reads it, so its load keeps a
// row of its own before c1 (stage 1). w1 is loaded (stage 0) while a computes
// the previous slice; w2 while r computes.
// RUN: tpuc-opt %s -p layer-group | filecheck %s

// CHECK:      "tpu.Group"(%x, %w1, %none, %w2) ({
// CHECK-NEXT: "tpu.Load"(%x) {ts = 0 : i64, stage = 1 : i64,
// CHECK-NEXT: "tpu.Load"(%w2) {ts = 2 : i64, stage = 1 : i64,
// CHECK-NEXT: "tpu.Load"(%w1) {ts = 4 : i64, stage = 0 : i64,
// CHECK-NEXT: name = "c1", {{.*}}lg = #tpu.local<ts = 1, stage = 1,
// CHECK-NEXT: name = "r", lg = #tpu.local<ts = 2, stage = 1,
// CHECK-NEXT: name = "c2", {{.*}}lg = #tpu.local<ts = 3, stage = 1,
// CHECK-NEXT: name = "a", lg = #tpu.local<ts = 4, stage = 1,
// CHECK-NEXT: "tpu.Store"(%{{.*}}) {ts = 1 : i64, stage = 2 : i64,
// CHECK-NEXT: "tpu.Yield"
// CHECK-NEXT: }) {nsecs = 1 : i64, hsecs = 1 : i64, wsecs = 1 : i64, stages = 3 : i64, timesteps = 5 : i64

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x32x48x48xbf16>) -> tensor<1x32x48x48xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x32x48x48xbf16>) -> tensor<1x32x48x48xbf16>
    %w1 = "top.Weight"() {name = "w1"} : () -> tensor<32x32x3x3xbf16>
    %w2 = "top.Weight"() {name = "w2"} : () -> tensor<32x32x3x3xbf16>
    %none = "top.None"() : () -> none
    %c1 = "tpu.Conv2D"(%x, %w1, %none) {name = "c1", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x48x48xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x48x48xbf16>
    %r = "tpu.Relu"(%c1) {name = "r"} : (tensor<1x32x48x48xbf16>) -> tensor<1x32x48x48xbf16>
    %c2 = "tpu.Conv2D"(%r, %w2, %none) {name = "c2", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x48x48xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x48x48xbf16>
    %a = "tpu.Add"(%c2, %x) {name = "a"} : (tensor<1x32x48x48xbf16>, tensor<1x32x48x48xbf16>) -> tensor<1x32x48x48xbf16>
    func.return %a : tensor<1x32x48x48xbf16>
  }
}
