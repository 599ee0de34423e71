// A conv chain in one tpu.Group, sliced along H (cv183x: 32 KiB lanes; f32
// GEMM convs would stay whole, bf16 convs slice with float_slices=true).
// The group reads x and both weights (operands) and yields c2 (its result);
// in its body: the loads, the three ops reading them, the store, the yield.
// Backward slices from c2's three 32-row slices: c1 holds rows [0,33)
// [31,65) [63,96) (one halo row each side), x [0,34) [30,66) [62,96). The
// window pads per slice: top pad only on slice 0, bottom pad only on the last.
// The weights are held (loaded once); the printed group parses back (RUN 2).
// RUN: tpuc-opt %s -p 'layer-group{float_slices=true}' | filecheck %s
// RUN: tpuc-opt %s -p 'layer-group{float_slices=true}' | tpuc-opt | filecheck %s

// CHECK:      %w2 = "top.Weight"()
// CHECK-NEXT: %c2 = "tpu.Group"(%x, %w1, %none, %w2) ({
// CHECK-NEXT: %[[W2:.+]] = "tpu.Load"(%w2) {ts = 1 : i64, stage = 1 : i64, addr = {{[0-9]+}} : i64, size = 576 : i64, held}
// CHECK-NEXT: %[[X:.+]] = "tpu.Load"(%x) {{{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 34), (30, 36), (62, 34)], w = [(0, 96)]>}
// CHECK-NEXT: %[[W1:.+]] = "tpu.Load"(%w1) {{{.*}} held}
// CHECK-NEXT: %c1 = "tpu.Conv2D"(%[[X]], %[[W1]], %none) {{{.*}} lg = #tpu.local<ts = 0, stage = 1, addr = {{[0-9]+}}, size = 6528, slices = #tpu.slices<n = [(0, 1)], h = [(0, 33), (31, 34), (63, 33)], w = [(0, 96)]>, pads = #tpu.pads<h = [(1, 0, 0), (0, 0, 0), (0, 1, 0)], w = [(1, 1, 0)]>>}
// CHECK-NEXT: %r = "tpu.Relu"(%c1) {name = "r", lg = #tpu.local<ts = 1, {{.*}} h = [(0, 33), (31, 34), (63, 33)]
// CHECK-NEXT: %[[C2:.+]] = "tpu.Conv2D"(%r, %[[W2]], %none) {{{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 32), (32, 32), (64, 32)], w = [(0, 96)]>, pads = #tpu.pads<h = [(1, 0, 0), (0, 0, 0), (0, 1, 0)], w = [(1, 1, 0)]>>}
// CHECK-NEXT: %[[S:.+]] = "tpu.Store"(%[[C2]]) {{{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 32), (32, 32), (64, 32)], w = [(0, 96)]>}
// CHECK-NEXT: "tpu.Yield"(%[[S]])
// CHECK-NEXT: }) {nsecs = 1 : i64, hsecs = 3 : i64, wsecs = 1 : i64, stages = 3 : i64, timesteps = 3 : i64, cycles = {{[0-9]+}} : i64}
// CHECK-NEXT: func.return %c2

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16>
    %w1 = "top.Weight"() {name = "w1"} : () -> tensor<32x32x3x3xbf16>
    %none = "top.None"() : () -> none
    %c1 = "tpu.Conv2D"(%x, %w1, %none) {name = "c1", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x96x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x96x96xbf16>
    %r = "tpu.Relu"(%c1) {name = "r"} : (tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16>
    %w2 = "top.Weight"() {name = "w2"} : () -> tensor<32x32x3x3xbf16>
    %c2 = "tpu.Conv2D"(%r, %w2, %none) {name = "c2", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x96x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x96x96xbf16>
    func.return %c2 : tensor<1x32x96x96xbf16>
  }
}
