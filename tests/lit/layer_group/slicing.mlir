// layer-group slicing on cv183x (32 KiB lanes): 96x96 bf16 planes do not fit
// three at a time, so the group of six ops is cut into hsecs = 2. Backward
// inference from the concat's two 12-row slices (near-even split of 24):
//   pool 2x2 s2:            [0,12) [12,24) -> [0,24) [24,48)
//   conv 3x3 s2 p2 d2:      out [0,24)  -> (0*2-2 .. 23*2-2+4+1) = [-2,49) -> [0,49)
//                           out [24,48) -> [46, 97) clamped to [46,96): 50 rows
//   relu (elementwise):     the same rows
//   conv 3x3 s1 p1:         [0,49) -> [-1,50) -> [0,50); [46,96) -> [45,96): 51 rows
// Top padding only applies to the slice starting at row 0 (its unclamped
// start is -1 or -2), bottom padding only to the one ending at 96.
// Slices print as (offset, size) per slice index; pads as (begin, end, output
// padding) per slice index.
// (f32 convs: float_slices=true lets them slice; deploy keeps float GEMM convs whole.)
// RUN: tpuc-opt %s -p 'layer-group{float_slices=true}' | filecheck %s
// RUN: tpuc-opt %s -p 'layer-group{disable=true}' | filecheck %s --check-prefix=OFF
// RUN: not tpuc-opt %s -p 'layer-group{opt=3}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: tpuc-opt %s -p 'layer-group{debug=true float_slices=true}' -o %t 2>&1 | filecheck %s --check-prefix=DEBUG

// CHECK:      %cat = "tpu.Group"(%x, %w1, %none, %w2) ({
// CHECK-NEXT: "tpu.Load"(%w2) {{{.*}} held}
// CHECK-NEXT: "tpu.Load"(%x) {{{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 50), (45, 51)], w = [(0, 96)]>}
// CHECK-NEXT: "tpu.Load"(%w1) {{{.*}} held}
// CHECK-NEXT: name = "c1", {{.*}} lg = #tpu.local<{{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 49), (46, 50)], w = [(0, 96)]>, pads = #tpu.pads<h = [(1, 0, 0), (0, 1, 0)], w = [(1, 1, 0)]>>
// CHECK-NEXT: name = "r", lg = #tpu.local<{{.*}} h = [(0, 49), (46, 50)]
// CHECK-NEXT: name = "c2", {{.*}} lg = #tpu.local<{{.*}} h = [(0, 24), (24, 24)], w = [(0, 48)]>, pads = #tpu.pads<h = [(2, 0, 0), (0, 2, 0)], w = [(2, 2, 0)]>>
// CHECK-NEXT: name = "p", {{.*}} lg = #tpu.local<{{.*}} h = [(0, 12), (12, 12)]
// CHECK-NEXT: name = "s", lg = #tpu.local<{{.*}} h = [(0, 12), (12, 12)]
// CHECK-NEXT: name = "cat", {{.*}} lg = #tpu.local<{{.*}} h = [(0, 12), (12, 12)]
// CHECK-NEXT: "tpu.Store"({{.*}}) {{{.*}} slices = #tpu.slices<n = [(0, 1)], h = [(0, 12), (12, 12)], w = [(0, 24)]>}
// CHECK:      }) {nsecs = 1 : i64, hsecs = 2 : i64, wsecs = 1 : i64, stages = 3 : i64

// OFF: module.layer_group_cycles = [[[CYCLES:[0-9]+]] : i64, [[CYCLES]] : i64]
// OFF-NOT: tpu.Group

// DEBUG: layer-group: 1 groups of 6/6 layers (ops per group [6]; slices n x h x w: 1x2x1); estimated [[C:[0-9]+]] cycles, all-global {{[0-9]+}}
// DEBUG-NEXT: layer-group:   c1..cat (6 ops): the last layer

// BAD: error: layer-group: opt=3; use 1 (greedy) or 2 (dynamic programming)

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x32x96x96xbf16>) -> tensor<1x64x24x24xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16>
    %w1 = "top.Weight"() {name = "w1"} : () -> tensor<32x32x3x3xbf16>
    %w2 = "top.Weight"() {name = "w2"} : () -> tensor<32x32x3x3xbf16>
    %none = "top.None"() : () -> none
    %c1 = "tpu.Conv2D"(%x, %w1, %none) {name = "c1", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x96x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x96x96xbf16>
    %r = "tpu.Relu"(%c1) {name = "r"} : (tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16>
    %c2 = "tpu.Conv2D"(%r, %w2, %none) {name = "c2", kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [2 : i64, 2 : i64, 2 : i64, 2 : i64], dilations = [2 : i64, 2 : i64], group = 1 : i64} : (tensor<1x32x96x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x48x48xbf16>
    %p = "tpu.Pool2D"(%c2) {name = "p", kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], pads = [0 : i64, 0 : i64, 0 : i64, 0 : i64], ceil_mode = false, pool_mode = "Max"} : (tensor<1x32x48x48xbf16>) -> tensor<1x32x24x24xbf16>
    %s = "tpu.Sigmoid"(%p) {name = "s"} : (tensor<1x32x24x24xbf16>) -> tensor<1x32x24x24xbf16>
    %cat = "tpu.Concat"(%p, %s) {name = "cat", axis = 1 : i64} : (tensor<1x32x24x24xbf16>, tensor<1x32x24x24xbf16>) -> tensor<1x64x24x24xbf16>
    func.return %cat : tensor<1x64x24x24xbf16>
  }
}
