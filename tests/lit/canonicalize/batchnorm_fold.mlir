// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// Conv -> BatchNorm folds into the Conv: s = gamma/sqrt(var+eps) = [1, 2],
// w' = w*s = [1, 6], b' = (b-mean)*s + beta = [0.5, -5]. The Conv takes the
// BatchNorm's name; the old weights are erased.
// CHECK-LABEL: func.func @conv_bn
// CHECK-NOT:     name = "w"
// CHECK-DAG:     %[[W:.*]] = "top.Weight"() {name = "bn_filter", value = dense<{{\[\[\[\[}}1.000000e+00]]], {{\[\[\[}}6.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-DAG:     %[[B:.*]] = "top.Weight"() {name = "bn_bias{{.*}}", value = dense<[5.000000e-01, -5.000000e+00]> : tensor<2xf32>}
// CHECK:         %[[C:.*]] = "top.Conv"(%{{.*}}, %[[W]], %[[B]]) {name = "bn",
// CHECK-NOT:     top.BatchNorm
// CHECK-NOT:     top.Scale
// CHECK:         func.return %[[C]]
module {
  func.func @conv_bn(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %b = "top.Weight"() {name = "b", value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %1 = "top.Conv"(%0, %w, %b) {name = "conv", kernel_shape = [1, 1], group = 2 : i64} : (tensor<1x2x3x3xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    %m = "top.Weight"() {name = "mean", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var", value = dense<[4.0, 16.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %g = "top.Weight"() {name = "gamma", value = dense<[2.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %be = "top.Weight"() {name = "beta", value = dense<[0.5, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %2 = "top.BatchNorm"(%1, %m, %v, %g, %be) {name = "bn", epsilon = 0.0} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    func.return %2 : tensor<1x2x3x3xf32>
  }
}

// -----

// Conv -> BatchNorm -> Relu: both fold, the Conv ends with the ReLU's name.
// CHECK-LABEL: func.func @conv_bn_relu
// CHECK:         "top.Conv"{{.*}}name = "relu",{{.*}}do_relu = true
// CHECK-NOT:     top.Relu
module {
  func.func @conv_bn_relu(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x3x3xf32>} : () -> tensor<2x2x3x3xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv", kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x2x3x3xf32>, tensor<2x2x3x3xf32>, none) -> tensor<1x2x3x3xf32>
    %m = "top.Weight"() {name = "mean", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var", value = dense<[4.0, 16.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %2 = "top.BatchNorm"(%1, %m, %v, %n, %n) {name = "bn", epsilon = 0.0} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, none, none) -> tensor<1x2x3x3xf32>
    %3 = "top.Relu"(%2) {name = "relu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %3 : tensor<1x2x3x3xf32>
  }
}

// -----

// A BatchNorm not after a Conv becomes a Scale: scale = [1, 2],
// bias = beta - mean*scale = [-0.5, -3], shaped [1, C, 1, 1].
// CHECK-LABEL: func.func @bn_to_scale
// CHECK-DAG:     %[[S:.*]] = "top.Weight"() {name = "bn_scale", value = dense<{{\[\[\[\[}}1.000000e+00]], {{\[\[}}2.000000e+00]]]]> : tensor<1x2x1x1xf32>}
// CHECK-DAG:     %[[B:.*]] = "top.Weight"() {name = "bn_shift", value = dense<{{\[\[\[\[}}-5.000000e-01]], {{\[\[}}-3.000000e+00]]]]> : tensor<1x2x1x1xf32>}
// CHECK:         "top.Scale"(%{{.*}}, %[[S]], %[[B]]) {name = "bn"} : (tensor<1x2x3x3xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x3x3xf32>
module {
  func.func @bn_to_scale(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %m = "top.Weight"() {name = "mean", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var", value = dense<[4.0, 16.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %g = "top.Weight"() {name = "gamma", value = dense<[2.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %be = "top.Weight"() {name = "beta", value = dense<[0.5, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %1 = "top.BatchNorm"(%0, %m, %v, %g, %be) {name = "bn", epsilon = 0.0} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    func.return %1 : tensor<1x2x3x3xf32>
  }
}

// -----

// Negative: the Conv already applies a ReLU, so the BatchNorm (as a Scale) stays after it.
// CHECK-LABEL: func.func @conv_relu_bn
// CHECK:         "top.Conv"{{.*}}name = "conv",{{.*}}do_relu = true
// CHECK:         "top.Scale"{{.*}}name = "bn"
module {
  func.func @conv_relu_bn(%arg0: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv", kernel_shape = [1, 1], do_relu = true} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %m = "top.Weight"() {name = "mean", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var", value = dense<[4.0, 16.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %2 = "top.BatchNorm"(%1, %m, %v, %n, %n) {name = "bn", epsilon = 0.0} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, none, none) -> tensor<1x2x3x3xf32>
    func.return %2 : tensor<1x2x3x3xf32>
  }
}

// -----

// Negative: the Conv output is also returned; it must stay observable.
// CHECK-LABEL: func.func @conv_returned
// CHECK:         %[[C:.*]] = "top.Conv"{{.*}}name = "conv"
// CHECK:         %[[S:.*]] = "top.Scale"(%[[C]]
// CHECK:         func.return %[[C]], %[[S]]
module {
  func.func @conv_returned(%arg0: tensor<1x2x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %w = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv", kernel_shape = [1, 1]} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %m = "top.Weight"() {name = "mean", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var", value = dense<[4.0, 16.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %2 = "top.BatchNorm"(%1, %m, %v, %n, %n) {name = "bn", epsilon = 0.0} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, none, none) -> tensor<1x2x3x3xf32>
    func.return %1, %2 : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
  }
}
