// The three-stage software pipeline of a sliced group (cv183x; 4 H slices of
// 32 rows, two timesteps per loop iteration). Stage 1 items work on slice i,
// stage 0 on slice i+1, stage 2 on slice i-1 (the emitter runs 4 + 2
// iterations). Timestep 0: relu computes slice i while y's slice i is loaded
// (the add of the same iteration reads it) and the store writes b's slice
// i-1 (stage 2); timestep 1: add computes slice i while x's slice i+1 is
// loaded (stage 0) for the next iteration's relu.
// RUN: tpuc-opt %s -p layer-group | filecheck %s

// CHECK:      %b = "tpu.Group"(%x, %y) ({
// CHECK-NEXT: %[[Y:.+]] = "tpu.Load"(%y) {ts = 0 : i64, stage = 1 : i64, {{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 32), (32, 32), (64, 32), (96, 32)], w = [(0, 128)]>}
// CHECK-NEXT: %[[X:.+]] = "tpu.Load"(%x) {ts = 1 : i64, stage = 0 : i64,
// CHECK-NEXT: %a = "tpu.Relu"(%[[X]]) {name = "a", lg = #tpu.local<ts = 0, stage = 1,
// CHECK-NEXT: %[[B:.+]] = "tpu.Add"(%a, %[[Y]]) {name = "b", lg = #tpu.local<ts = 1, stage = 1,
// CHECK-NEXT: %[[S:.+]] = "tpu.Store"(%[[B]]) {ts = 0 : i64, stage = 2 : i64, slices = #tpu.slices<n = [(0, 1)], h = [(0, 32), (32, 32), (64, 32), (96, 32)], w = [(0, 128)]>}
// CHECK-NEXT: "tpu.Yield"(%[[S]])
// CHECK-NEXT: }) {nsecs = 1 : i64, hsecs = 4 : i64, wsecs = 1 : i64, stages = 3 : i64, timesteps = 2 : i64,

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x32x128x128xbf16>, %arg1: tensor<1x32x128x128xbf16>) -> tensor<1x32x128x128xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x32x128x128xbf16>) -> tensor<1x32x128x128xbf16>
    %y = "top.Input"(%arg1) {name = "y"} : (tensor<1x32x128x128xbf16>) -> tensor<1x32x128x128xbf16>
    %a = "tpu.Relu"(%x) {name = "a"} : (tensor<1x32x128x128xbf16>) -> tensor<1x32x128x128xbf16>
    %b = "tpu.Add"(%a, %y) {name = "b"} : (tensor<1x32x128x128xbf16>, tensor<1x32x128x128xbf16>) -> tensor<1x32x128x128xbf16>
    func.return %b : tensor<1x32x128x128xbf16>
  }
}
