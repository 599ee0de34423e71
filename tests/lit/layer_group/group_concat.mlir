// A group holding a concat (bm1684x f16; fits without slicing): a = relu(x),
// b = sigmoid(a), cat = concat(a, b) along channels. Both concat operands are
// results of the group's own ops (local buffers); only x is loaded and only
// cat is stored: the group's one result. Sigmoid has a scratch buffer.
// RUN: tpuc-opt %s -p layer-group | filecheck %s

// CHECK:      %cat = "tpu.Group"(%x) ({
// CHECK-NEXT: %[[X:.+]] = "tpu.Load"(%x) {ts = 2 : i64, stage = 0 : i64, addr = {{[0-9]+}} : i64, size = 2048 : i64, slices = #tpu.slices<n = [(0, 1)], h = [(0, 32)], w = [(0, 32)]>}
// CHECK-NEXT: %a = "tpu.Relu"(%[[X]]) {name = "a", lg = #tpu.local<ts = 0, stage = 1, addr = {{[0-9]+}}, size = 2048,
// CHECK-NEXT: %b = "tpu.Sigmoid"(%a) {name = "b", lg = #tpu.local<ts = 1, stage = 1, addr = {{[0-9]+}}, size = 2048, {{(buffer_addr = [0-9]+, )?}}buffer_size = 4096,
// CHECK-NEXT: %[[CAT:.+]] = "tpu.Concat"(%a, %b) {name = "cat", axis = 1 : i64, lg = #tpu.local<ts = 2, stage = 1, addr = {{[0-9]+}}, size = 4096, slices = #tpu.slices<n = [(0, 1)], h = [(0, 32)], w = [(0, 32)]>>}
// CHECK-SAME: -> tensor<1x128x32x32xf16>
// CHECK-NEXT: %[[S:.+]] = "tpu.Store"(%[[CAT]]) {ts = 0 : i64, stage = 2 : i64,
// CHECK-NEXT: "tpu.Yield"(%[[S]])
// CHECK-NEXT: }) {nsecs = 1 : i64, hsecs = 1 : i64, wsecs = 1 : i64, stages = 3 : i64, timesteps = 3 : i64, cycles = {{[0-9]+}} : i64} : (tensor<1x64x32x32xf16>) -> tensor<1x128x32x32xf16>
// CHECK-NEXT: func.return %cat

builtin.module attributes {module.chip = "bm1684x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x64x32x32xf16>) -> tensor<1x128x32x32xf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x64x32x32xf16>) -> tensor<1x64x32x32xf16>
    %a = "tpu.Relu"(%x) {name = "a"} : (tensor<1x64x32x32xf16>) -> tensor<1x64x32x32xf16>
    %b = "tpu.Sigmoid"(%a) {name = "b"} : (tensor<1x64x32x32xf16>) -> tensor<1x64x32x32xf16>
    %cat = "tpu.Concat"(%a, %b) {name = "cat", axis = 1 : i64} : (tensor<1x64x32x32xf16>, tensor<1x64x32x32xf16>) -> tensor<1x128x32x32xf16>
    func.return %cat : tensor<1x128x32x32xf16>
  }
}
