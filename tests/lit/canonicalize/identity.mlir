// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// Every op here leaves its input unchanged and is removed.
// CHECK-LABEL: func.func @identities
// CHECK:         %[[X:.*]] = "top.Input"
// CHECK-NEXT:    %[[S:.*]] = "top.Sigmoid"(%[[X]]) {name = "sig"}
// CHECK-NEXT:    func.return %[[S]]
module {
  func.func @identities(%arg0: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %1 = "top.Permute"(%0) {name = "perm", order = [0, 1, 2, 3]} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %2 = "top.Slice"(%1) {name = "slice", offset = [0, 0, 0, 0], ends = [1, 2, 9223372036854775807, 4], steps = [1, 1, 1, 1]} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %3 = "top.Pad"(%2) {name = "pad", paddings = [0, 0, 0, 0, 0, 0, 0, 0]} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %4 = "top.Tile"(%3) {name = "tile", tile = [1, 1, 1, 1]} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %5 = "top.Expand"(%4) {name = "expand", shape = [2, 1, 1]} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %6 = "top.Upsample"(%5) {name = "up", scale_h = 1 : i64, scale_w = 1 : i64} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %7 = "top.MulConst"(%6) {name = "mul1", const_val = 1.0} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %8 = "top.AddConst"(%7) {name = "add0", const_val = 0.0} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %9 = "top.Cast"(%8) {name = "cast", to = "F32"} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %10 = "top.Sigmoid"(%9) {name = "sig"} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    func.return %10 : tensor<1x2x3x4xf32>
  }
}

// -----

// Negative: each op here changes its input.
// CHECK-LABEL: func.func @not_identities
// CHECK:         top.Permute
// CHECK:         top.Slice
// CHECK:         top.Slice
// CHECK:         top.Pad
// CHECK:         top.AddConst
// CHECK:         top.Cast
module {
  func.func @not_identities(%arg0: tensor<2x2xf32>) -> tensor<2x1xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %1 = "top.Permute"(%0) {name = "perm", order = [1, 0]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %2 = "top.Slice"(%1) {name = "rev", offset = [0, 1], ends = [2, -3], steps = [1, -1]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %3 = "top.Slice"(%2) {name = "cut", offset = [0, 0], ends = [2, -1], steps = [1, 1]} : (tensor<2x2xf32>) -> tensor<2x1xf32>
    %4 = "top.Pad"(%3) {name = "pad", paddings = [0, 0, 0, 1]} : (tensor<2x1xf32>) -> tensor<2x2xf32>
    %5 = "top.AddConst"(%4) {name = "relu0", const_val = 0.0, do_relu = true} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %6 = "top.Cast"(%5) {name = "cast", to = "INT32"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %7 = "top.Slice"(%6) {name = "last", offset = [0, 0], ends = [2, 1], steps = [1, 1]} : (tensor<2x2xf32>) -> tensor<2x1xf32>
    func.return %7 : tensor<2x1xf32>
  }
}

// -----

// An identity whose result is returned keeps its name: its producer takes it over.
// CHECK-LABEL: func.func @returned_identity
// CHECK:         %[[S:.*]] = "top.Sigmoid"(%{{.*}}) {name = "out"}
// CHECK-NEXT:    func.return %[[S]]
module {
  func.func @returned_identity(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "top.Sigmoid"(%0) {name = "sig"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "top.Reshape"(%1) {name = "out", shape = [2, 3]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %2 : tensor<2x3xf32>
  }
}

// -----

// Negative: a returned identity on a graph input, or on a tensor with other
// users, stays so that both names remain observable.
// CHECK-LABEL: func.func @returned_identity_kept
// CHECK:         %[[X:.*]] = "top.Input"
// CHECK:         %[[A:.*]] = "top.Permute"(%[[X]]) {name = "p1"
// CHECK:         %[[S:.*]] = "top.Sigmoid"
// CHECK:         %[[B:.*]] = "top.Permute"(%[[S]]) {name = "p2"
// CHECK:         func.return %[[A]], %[[S]], %[[B]]
module {
  func.func @returned_identity_kept(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "top.Permute"(%0) {name = "p1", order = [0, 1]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "top.Sigmoid"(%0) {name = "sig"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = "top.Permute"(%2) {name = "p2", order = [0, 1]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
  }
}
