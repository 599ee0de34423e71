// A group holding a concat, cut into H slices (cv183x bf16: 32 KiB lanes, so
// the 64x64 planes need 3 slices of 22, 21 and 21 rows): a = relu(x),
// b = sigmoid(a), cat = concat(a, b) along channels. Every op and the concat
// work on the same rows of each slice (no halo); x's slices are loaded and
// cat's stored, stage 0 one slice ahead and stage 2 one behind the compute.
// RUN: tpuc-opt %s -p layer-group | filecheck %s

// CHECK:      %cat = "tpu.Group"(%x) ({
// CHECK-NEXT: %[[X:.+]] = "tpu.Load"(%x) {ts = 2 : i64, stage = 0 : i64, addr = {{[0-9]+}} : i64, size = 5632 : i64, slices = #tpu.slices<n = [(0, 1)], h = [(0, 22), (22, 21), (43, 21)], w = [(0, 64)]>}
// CHECK-NEXT: %a = "tpu.Relu"(%[[X]]) {name = "a", lg = #tpu.local<ts = 0, stage = 1, addr = {{[0-9]+}}, size = 5632, slices = #tpu.slices<n = [(0, 1)], h = [(0, 22), (22, 21), (43, 21)], w = [(0, 64)]>>}
// CHECK-NEXT: %b = "tpu.Sigmoid"(%a) {name = "b", lg = #tpu.local<ts = 1, stage = 1, addr = {{[0-9]+}}, size = 5632, {{(buffer_addr = [0-9]+, )?}}buffer_size = 11264, slices = #tpu.slices<n = [(0, 1)], h = [(0, 22), (22, 21), (43, 21)], w = [(0, 64)]>>}
// CHECK-NEXT: %[[CAT:.+]] = "tpu.Concat"(%a, %b) {name = "cat", axis = 1 : i64, lg = #tpu.local<ts = 2, stage = 1, addr = {{[0-9]+}}, size = 11264, slices = #tpu.slices<n = [(0, 1)], h = [(0, 22), (22, 21), (43, 21)], w = [(0, 64)]>>}
// CHECK-SAME: -> tensor<1x128x64x64xbf16>
// CHECK-NEXT: %[[S:.+]] = "tpu.Store"(%[[CAT]]) {ts = 0 : i64, stage = 2 : i64, slices = #tpu.slices<n = [(0, 1)], h = [(0, 22), (22, 21), (43, 21)], w = [(0, 64)]>}
// CHECK-NEXT: "tpu.Yield"(%[[S]])
// CHECK-NEXT: }) {nsecs = 1 : i64, hsecs = 3 : i64, wsecs = 1 : i64, stages = 3 : i64, timesteps = 3 : i64, cycles = {{[0-9]+}} : i64} : (tensor<1x64x64x64xbf16>) -> tensor<1x128x64x64xbf16>
// CHECK-NEXT: func.return %cat

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x64x64x64xbf16>) -> tensor<1x128x64x64xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x64x64x64xbf16>) -> tensor<1x64x64x64xbf16>
    %a = "tpu.Relu"(%x) {name = "a"} : (tensor<1x64x64x64xbf16>) -> tensor<1x64x64x64xbf16>
    %b = "tpu.Sigmoid"(%a) {name = "b"} : (tensor<1x64x64x64xbf16>) -> tensor<1x64x64x64xbf16>
    %cat = "tpu.Concat"(%a, %b) {name = "cat", axis = 1 : i64} : (tensor<1x64x64x64xbf16>, tensor<1x64x64x64xbf16>) -> tensor<1x128x64x64xbf16>
    func.return %cat : tensor<1x128x64x64xbf16>
  }
}
