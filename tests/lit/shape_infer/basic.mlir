// RUN: tpuc-opt %s -p shape-infer --split-input-file | filecheck %s

// Unranked results get their shapes in order, and the function type follows
// what func.return returns.
// CHECK-LABEL: func.func @conv_pool_flatten(%arg0: tensor<1x3x32x32xf32>) -> tensor<1x1024xf32>
// CHECK:         "top.Input"(%arg0) {name = "in"} : (tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32>
// CHECK:         "top.Conv"{{.*}}name = "conv1"{{.*}} -> tensor<1x16x16x16xf32>
// CHECK:         "top.MaxPool"{{.*}}name = "pool1"{{.*}} : (tensor<1x16x16x16xf32>) -> tensor<1x16x8x8xf32>
// CHECK:         "top.Reshape"{{.*}}name = "flat"{{.*}} : (tensor<1x16x8x8xf32>) -> tensor<1x1024xf32>
// CHECK-NEXT:    func.return %{{.*}} : tensor<1x1024xf32>
// CHECK-NOT:     tensor<*xf32>
module {
  func.func @conv_pool_flatten(%arg0: tensor<1x3x32x32xf32>) -> tensor<*xf32> {
    %0 = "top.Input"(%arg0) {name = "in"} : (tensor<1x3x32x32xf32>) -> tensor<*xf32>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<16x3x3x3xf32>
    %2 = "top.Weight"() {name = "b"} : () -> tensor<16xf32>
    %3 = "top.Conv"(%0, %1, %2) {name = "conv1", kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<*xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<*xf32>
    %4 = "top.MaxPool"(%3) {name = "pool1", kernel_shape = [2, 2], strides = [2, 2]} : (tensor<*xf32>) -> tensor<*xf32>
    %5 = "top.Reshape"(%4) {name = "flat", shape = [1, -1]} : (tensor<*xf32>) -> tensor<*xf32>
    func.return %5 : tensor<*xf32>
  }
}

// -----

// Multi-result ops (Split, TopK) and broadcasting with two function results.
// CHECK-LABEL: func.func @split_topk(%arg0: tensor<2x10xf32>, %arg1: tensor<3x1x1xf32>) -> (tensor<3x2x3xf32>, tensor<2x2xf32>)
// CHECK:         "top.Split"{{.*}} -> (tensor<2x3xf32>, tensor<2x7xf32>)
// CHECK:         "top.TopK"{{.*}} -> (tensor<2x2xf32>, tensor<2x2xf32>)
// CHECK:         "top.Add"{{.*}} -> tensor<3x2x3xf32>
module {
  func.func @split_topk(%arg0: tensor<2x10xf32>, %arg1: tensor<3x1x1xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
    %0:2 = "top.Split"(%arg0) {name = "s", result_names = ["s0", "s1"], axis = 1, split_size = [3, 7]} : (tensor<2x10xf32>) -> (tensor<*xf32>, tensor<*xf32>)
    %1:2 = "top.TopK"(%0#1) {name = "k", result_names = ["kv", "ki"], K = 2} : (tensor<*xf32>) -> (tensor<*xf32>, tensor<*xf32>)
    %2 = "top.Add"(%0#0, %arg1) {name = "add"} : (tensor<*xf32>, tensor<3x1x1xf32>) -> tensor<*xf32>
    func.return %2, %1#1 : tensor<*xf32>, tensor<*xf32>
  }
}

// -----

// An operand of unknown shape leaves the results unranked; the element type
// a result already has is kept.
// CHECK-LABEL: func.func @partial(%arg0: tensor<*xf32>, %arg1: tensor<4x5xf32>) -> (tensor<*xf32>, tensor<4x5xi32>)
// CHECK:         "top.Relu"(%arg0) {name = "r"} : (tensor<*xf32>) -> tensor<*xf32>
// CHECK:         "top.Cast"(%arg1) {name = "c", to = "INT32"} : (tensor<4x5xf32>) -> tensor<4x5xi32>
module {
  func.func @partial(%arg0: tensor<*xf32>, %arg1: tensor<4x5xf32>) -> (tensor<*xf32>, tensor<*xi32>) {
    %0 = "top.Relu"(%arg0) {name = "r"} : (tensor<*xf32>) -> tensor<*xf32>
    %1 = "top.Cast"(%arg1) {name = "c", to = "INT32"} : (tensor<4x5xf32>) -> tensor<*xi32>
    func.return %0, %1 : tensor<*xf32>, tensor<*xi32>
  }
}
