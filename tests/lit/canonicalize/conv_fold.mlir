// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// Conv -> Scale folds: w' = w*s, b' = b*s + t (w = 1, b = [1, 2], s = [2, 3], t = [1, 1]).
// CHECK-LABEL: func.func @conv_scale
// CHECK-DAG:     %[[W:.*]] = "top.Weight"() {name = "scale_filter", value = dense<{{\[\[\[\[}}2.000000e+00]]], {{\[\[\[}}3.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-DAG:     %[[B:.*]] = "top.Weight"() {name = "scale_bias", value = dense<[3.000000e+00, 7.000000e+00]> : tensor<2xf32>}
// CHECK:         %[[C:.*]] = "top.Conv"(%{{.*}}, %[[W]], %[[B]]) {name = "scale",{{.*}}do_relu = true, relu_limit = 6.000000e+00
// CHECK-NEXT:    func.return %[[C]]
module {
  func.func @conv_scale(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %b = "top.Weight"() {name = "b", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %1 = "top.Conv"(%0, %w, %b) {name = "conv", kernel_shape = [1, 1], group = 2 : i64} : (tensor<1x2x3x3xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    %s = "top.Weight"() {name = "s", value = dense<[2.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %t = "top.Weight"() {name = "t", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
    %2 = "top.Scale"(%1, %s, %t) {name = "scale", do_relu = true, relu_limit = 6.0} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    func.return %2 : tensor<1x2x3x3xf32>
  }
}

// -----

// Mul by a [C,1,1] constant after a Conv: Mul -> Scale -> into the Conv.
// CHECK-LABEL: func.func @conv_mul_channel
// CHECK-DAG:     %[[W:.*]] = "top.Weight"() {name = "mul_filter", value = dense<{{\[\[\[\[}}5.000000e-01]]], {{\[\[\[}}4.000000e+00]]]]>
// CHECK:         "top.Conv"(%{{.*}}, %[[W]], %{{.*}}) {name = "mul",
// CHECK-SAME:    : (tensor<1x2x3x3xf32>, tensor<2x1x1x1xf32>, none)
// CHECK-NOT:     top.Mul
// CHECK-NOT:     top.Scale
module {
  func.func @conv_mul_channel(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv", kernel_shape = [1, 1], group = 2 : i64} : (tensor<1x2x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %c = "top.Weight"() {name = "c", value = dense<[[[0.5]], [[2.0]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32>
    %2 = "top.Mul"(%1, %c) {name = "mul"} : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
    func.return %2 : tensor<1x2x3x3xf32>
  }
}

// -----

// Mul by a [1,C,1,1] constant not after a Conv becomes a Scale without bias.
// CHECK-LABEL: func.func @mul_channel_to_scale
// CHECK:         %[[C:.*]] = "top.Weight"() {name = "c"
// CHECK:         %[[N:.*]] = "top.None"()
// CHECK:         "top.Scale"(%{{.*}}, %[[C]], %[[N]]) {name = "mul"} : (tensor<1x2x3x3xf32>, tensor<1x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
module {
  func.func @mul_channel_to_scale(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %c = "top.Weight"() {name = "c", value = dense<[[[[0.5]], [[2.0]]]]> : tensor<1x2x1x1xf32>} : () -> tensor<1x2x1x1xf32>
    %1 = "top.Mul"(%c, %0) {name = "mul"} : (tensor<1x2x1x1xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %1 : tensor<1x2x3x3xf32>
  }
}

// -----

// Negative: a constant that varies along the last axis is not per-channel.
// CHECK-LABEL: func.func @mul_not_channel
// CHECK:         "top.Mul"
module {
  func.func @mul_not_channel(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %c = "top.Weight"() {name = "c", value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
    %1 = "top.Mul"(%0, %c) {name = "mul"} : (tensor<1x2x3x3xf32>, tensor<3xf32>) -> tensor<1x2x3x3xf32>
    func.return %1 : tensor<1x2x3x3xf32>
  }
}

// -----

// Add of a per-channel constant after a Conv goes into its bias (no bias before).
// CHECK-LABEL: func.func @conv_add_channel
// CHECK-DAG:     %[[B:.*]] = "top.Weight"() {name = "add_bias", value = dense<[5.000000e-01, -1.000000e+00]> : tensor<2xf32>}
// CHECK:         "top.Conv"(%{{.*}}, %{{.*}}, %[[B]]) {name = "add",
// CHECK-NOT:     top.Add
module {
  func.func @conv_add_channel(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv", kernel_shape = [1, 1]} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %c = "top.Weight"() {name = "c", value = dense<[[[0.5]], [[-1.0]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32>
    %2 = "top.Add"(%1, %c) {name = "add"} : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
    func.return %2 : tensor<1x2x3x3xf32>
  }
}

// -----

// MulConst and AddConst after a Conv fold into filter and bias: (x*w + b)*3 + 1.
// CHECK-LABEL: func.func @conv_mulconst_addconst
// CHECK-DAG:     %[[W:.*]] = "top.Weight"() {name = "mc_filter", value = dense<3.000000e+00> : tensor<2x2x1x1xf32>}
// CHECK-DAG:     %[[B:.*]] = "top.Weight"() {name = "ac_bias{{.*}}", value = dense<[4.000000e+00, 7.000000e+00]> : tensor<2xf32>}
// CHECK:         "top.Conv"(%{{.*}}, %[[W]], %[[B]]) {name = "ac",
// CHECK-NOT:     Const
module {
  func.func @conv_mulconst_addconst(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %b = "top.Weight"() {name = "b", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %1 = "top.Conv"(%0, %w, %b) {name = "conv", kernel_shape = [1, 1]} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    %2 = "top.MulConst"(%1) {name = "mc", const_val = 3.0} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %3 = "top.AddConst"(%2) {name = "ac", const_val = 1.0} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %3 : tensor<1x2x3x3xf32>
  }
}

// -----

// Negative: a filter shared by two Convs is never changed in place; each fold
// makes new weights, the unfolded Conv keeps the original.
// CHECK-LABEL: func.func @shared_filter
// CHECK-DAG:     %[[W:.*]] = "top.Weight"() {name = "w",
// CHECK-DAG:     %[[W2:.*]] = "top.Weight"() {name = "mc_filter",
// CHECK-DAG:     "top.Conv"(%{{.*}}, %[[W2]], %{{.*}}) {name = "mc",
// CHECK-DAG:     "top.Conv"(%{{.*}}, %[[W]], %{{.*}}) {name = "conv2",
module {
  func.func @shared_filter(%arg0: tensor<1x2x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv1", kernel_shape = [1, 1]} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %2 = "top.MulConst"(%1) {name = "mc", const_val = 3.0} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %3 = "top.Conv"(%0, %w, %n) {name = "conv2", kernel_shape = [1, 1]} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    func.return %2, %3 : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
  }
}
