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
// Ranges print as flat [start0, size0, start1, size1].
// (f32 convs: float_slices=true lets them slice; deploy keeps float GEMM convs whole.)
// RUN: tpuc-opt %s -p 'layer-group{float_slices=true}' | filecheck %s
// RUN: tpuc-opt %s -p 'layer-group{disable=true}' | filecheck %s --check-prefix=OFF
// RUN: not tpuc-opt %s -p 'layer-group{opt=3}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: tpuc-opt %s -p 'layer-group{debug=true float_slices=true}' -o %t 2>&1 | filecheck %s --check-prefix=DEBUG

// CHECK: module.layer_groups = [{id = 0 : i64, ops = ["c1", "r", "c2", "p", "s", "cat"], nsecs = 1 : i64, hsecs = 2 : i64, wsecs = 1 : i64, stages = 3 : i64
// CHECK-SAME: loads = [{tensor = "w2", {{.*}} held = true{{.*}}}, {tensor = "x", {{.*}} h = [0 : i64, 50 : i64, 45 : i64, 51 : i64], w = [0 : i64, 96 : i64]}
// CHECK-SAME: stores = [{tensor = "cat", {{.*}} h = [0 : i64, 12 : i64, 12 : i64, 12 : i64]
// CHECK: name = "c1", {{.*}} lg = {{{.*}} h = [0 : i64, 49 : i64, 46 : i64, 50 : i64], w = [0 : i64, 96 : i64]}
// CHECK: name = "r", lg = {{{.*}} h = [0 : i64, 49 : i64, 46 : i64, 50 : i64]
// CHECK: name = "c2", {{.*}} lg = {{{.*}} h = [0 : i64, 24 : i64, 24 : i64, 24 : i64], w = [0 : i64, 48 : i64]}
// CHECK: name = "p", {{.*}} lg = {{{.*}} h = [0 : i64, 12 : i64, 12 : i64, 12 : i64]
// CHECK: name = "s", lg = {{{.*}} h = [0 : i64, 12 : i64, 12 : i64, 12 : i64]
// CHECK: name = "cat", {{.*}} lg = {{{.*}} h = [0 : i64, 12 : i64, 12 : i64, 12 : i64]

// OFF: module.layer_groups = [], module.layer_group_cycles = [[[CYCLES:[0-9]+]] : i64, [[CYCLES]] : i64]
// OFF-NOT: lg =

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
