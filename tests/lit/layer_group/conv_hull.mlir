// Two convolutions read one tensor with different halos (cv183x, hsecs = 2).
// r is read by a (3x3, pad 1: rows [0,33) and [31,64)) and by b (1x1: rows
// [0,32) and [32,64)). TPU-MLIR's exception for conv consumers: r holds the
// hull, a reads all of it, and b records in `reads` the rows it reads of
// what r holds (its offset into r's buffer is 0 in slice 0, 32 - 31 = 1 in
// slice 1). Any other pair of consumers disagreeing invalidates the group.
// (f32 convs: float_slices=true lets them slice; deploy keeps float GEMM convs whole.)
// RUN: tpuc-opt %s -p 'layer-group{float_slices=true}' | filecheck %s

// CHECK:      name = "r", lg = #tpu.local<{{.*}} h = [(0, 33), (31, 33)], w = [(0, 96)]>>
// CHECK:      name = "a", {{.*}} h = [(0, 32), (32, 32)], w = [(0, 96)]>, pads = #tpu.pads<h = [(1, 0, 0), (0, 1, 0)], w = [(1, 1, 0)]>>
// CHECK:      name = "b", {{.*}} h = [(0, 32), (32, 32)], w = [(0, 96)]>, pads = {{.*}}, reads = [#tpu.read<operand = 0, slices = #tpu.slices<n = [(0, 1)], h = [(0, 32), (32, 32)], w = [(0, 96)]>>]>
// CHECK:      }) {nsecs = 1 : i64, hsecs = 2 : i64, wsecs = 1 : i64

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x32x64x96xbf16>) -> tensor<1x32x64x96xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x32x64x96xbf16>) -> tensor<1x32x64x96xbf16>
    %w1 = "top.Weight"() {name = "w1"} : () -> tensor<32x32x3x3xbf16>
    %w2 = "top.Weight"() {name = "w2"} : () -> tensor<32x32x1x1xbf16>
    %none = "top.None"() : () -> none
    %r = "tpu.Relu"(%x) {name = "r"} : (tensor<1x32x64x96xbf16>) -> tensor<1x32x64x96xbf16>
    %a = "tpu.Conv2D"(%r, %w1, %none) {name = "a", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x64x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x64x96xbf16>
    %b = "tpu.Conv2D"(%r, %w2, %none) {name = "b", kernel_shape = [1 : i64, 1 : i64], strides = [1 : i64, 1 : i64], pads = [0 : i64, 0 : i64, 0 : i64, 0 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x64x96xbf16>, tensor<32x32x1x1xbf16>, none) -> tensor<1x32x64x96xbf16>
    %y = "tpu.Add"(%a, %b) {name = "y"} : (tensor<1x32x64x96xbf16>, tensor<1x32x64x96xbf16>) -> tensor<1x32x64x96xbf16>
    func.return %y : tensor<1x32x64x96xbf16>
  }
}
