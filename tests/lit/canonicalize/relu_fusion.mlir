// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// A ReLU after a Conv becomes do_relu on the Conv, which takes the ReLU's name.
// CHECK-LABEL: func.func @conv_relu
// CHECK-NOT:     top.Relu
// CHECK:         %[[C:.*]] = "top.Conv"({{.*}}name = "relu1",{{.*}}do_relu = true, relu_limit = -1.000000e+00
// CHECK-NEXT:    func.return %[[C]]
module {
  func.func @conv_relu(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %1 = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.Conv"(%0, %1, %2) {name = "conv1", kernel_shape = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
    %4 = "top.Relu"(%3) {name = "relu1"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    func.return %4 : tensor<1x2x4x4xf32>
  }
}

// -----

// Clip(0, 6) is a ReLU6: relu_limit = 6.
// CHECK-LABEL: func.func @add_clip
// CHECK-NOT:     top.Clip
// CHECK:         "top.Add"(%{{.*}}, %{{.*}}) {name = "clip1", do_relu = true, relu_limit = 6.000000e+00
module {
  func.func @add_clip(%arg0: tensor<1x4xf32>, %arg1: tensor<1x4xf32>) -> tensor<1x4xf32> {
    %0 = "top.Input"(%arg0) {name = "a"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "top.Input"(%arg1) {name = "b"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %2 = "top.Add"(%0, %1) {name = "add1"} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
    %3 = "top.Clip"(%2) {name = "clip1", min = 0.0, max = 6.0} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    func.return %3 : tensor<1x4xf32>
  }
}

// -----

// A ReLU with a limit after an op that already has a looser one: the tighter limit wins.
// CHECK-LABEL: func.func @relu_limits_merge
// CHECK:         "top.MaxPool"(%{{.*}}) {name = "r2",{{.*}}do_relu = true, relu_limit = 3.000000e+00
module {
  func.func @relu_limits_merge(%arg0: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
    %1 = "top.MaxPool"(%0) {name = "pool", kernel_shape = [2, 2], strides = [2, 2], do_relu = true, relu_limit = 6.0} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
    %2 = "top.Relu"(%1) {name = "r2", relu_limit = 3.0} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
    func.return %2 : tensor<1x1x2x2xf32>
  }
}

// -----

// Negative: the Conv result has a second user, so the ReLU stays.
// CHECK-LABEL: func.func @two_users
// CHECK:         "top.Conv"{{.*}}name = "conv1"
// CHECK-NOT:     do_relu = true
// CHECK:         "top.Relu"
module {
  func.func @two_users(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %1 = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.Conv"(%0, %1, %2) {name = "conv1", kernel_shape = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
    %4 = "top.Relu"(%3) {name = "relu1"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %5 = "top.Add"(%3, %4) {name = "sum"} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    func.return %5 : tensor<1x2x4x4xf32>
  }
}

// -----

// Negative: the pre-ReLU tensor is a function output, it must stay observable.
// CHECK-LABEL: func.func @returned
// CHECK:         %[[C:.*]] = "top.Conv"{{.*}}name = "conv1"
// CHECK-NOT:     do_relu = true
// CHECK:         %[[R:.*]] = "top.Relu"(%[[C]])
// CHECK:         func.return %[[C]], %[[R]]
module {
  func.func @returned(%arg0: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %1 = "top.Weight"() {name = "w", value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.Conv"(%0, %1, %2) {name = "conv1", kernel_shape = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
    %4 = "top.Relu"(%3) {name = "relu1"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    func.return %3, %4 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  }
}

// -----

// Negative: Clip with a nonzero min is not a ReLU; a ReLU after a Sigmoid cannot fuse.
// CHECK-LABEL: func.func @not_fusable
// CHECK:         "top.Clip"
// CHECK:         "top.Sigmoid"
// CHECK:         "top.Relu"
module {
  func.func @not_fusable(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "top.AddConst"(%0) {name = "ac", const_val = 1.0} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %2 = "top.Clip"(%1) {name = "clip", min = -1.0, max = 6.0} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %3 = "top.Sigmoid"(%2) {name = "sig"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %4 = "top.Relu"(%3) {name = "relu"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    func.return %4 : tensor<1x4xf32>
  }
}

// -----

// Types not inferred yet on one side: the fused op takes the ReLU's result type,
// so the function signature still verifies.
// CHECK-LABEL: func.func @untyped
// CHECK:         %[[A:.*]] = "top.Add"({{.*}}name = "r",{{.*}}-> tensor<*xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<*xf32>
module {
  func.func @untyped(%arg0: tensor<1x4xf32>) -> tensor<*xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "top.Add"(%0, %0) {name = "add"} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
    %2 = "top.Relu"(%1) {name = "r"} : (tensor<1x4xf32>) -> tensor<*xf32>
    func.return %2 : tensor<*xf32>
  }
}
