// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// Mul / Add by a one-element weight become MulConst / AddConst; chains merge.
// CHECK-LABEL: func.func @scalar_consts
// CHECK:         %[[A:.*]] = "top.MulConst"(%{{.*}}) {name = "mul2", const_val = 6.000000e+00 : f64}
// CHECK:         %[[B:.*]] = "top.AddConst"(%[[A]]) {name = "add1", const_val = -1.500000e+00 : f64, do_relu = true, relu_limit = -1.000000e+00 : f64}
// CHECK:         func.return %[[B]]
// CHECK-NOT:     top.Weight
module {
  func.func @scalar_consts(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %c2 = "top.Weight"() {name = "two", value = dense<2.0> : tensor<1xf32>} : () -> tensor<1xf32>
    %c3 = "top.Weight"() {name = "three", value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
    %ch = "top.Weight"() {name = "neg", value = dense<-1.5> : tensor<1x1xf32>} : () -> tensor<1x1xf32>
    %1 = "top.Mul"(%0, %c2) {name = "mul1"} : (tensor<1x4xf32>, tensor<1xf32>) -> tensor<1x4xf32>
    %2 = "top.Mul"(%c3, %1) {name = "mul2"} : (tensor<f32>, tensor<1x4xf32>) -> tensor<1x4xf32>
    %3 = "top.Add"(%2, %ch) {name = "add1", do_relu = true} : (tensor<1x4xf32>, tensor<1x1xf32>) -> tensor<1x4xf32>
    func.return %3 : tensor<1x4xf32>
  }
}

// -----

// Negative: the merged-away MulConst is also returned, so it stays (the outer
// one reads the input directly).
// CHECK-LABEL: func.func @chain_inner_returned
// CHECK:         %[[A:.*]] = "top.MulConst"(%[[X:.*]]) {name = "m1", const_val = 2.000000e+00
// CHECK:         %[[B:.*]] = "top.MulConst"(%[[X]]) {name = "m2", const_val = 1.000000e+01
// CHECK:         func.return %[[A]], %[[B]]
module {
  func.func @chain_inner_returned(%arg0: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "top.MulConst"(%0) {name = "m1", const_val = 2.0} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %2 = "top.MulConst"(%1) {name = "m2", const_val = 5.0} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    func.return %1, %2 : tensor<1x4xf32>, tensor<1x4xf32>
  }
}

// -----

// Negative: a one-element constant that broadcasts the input to a bigger shape,
// an Add with coefficients, and an inner op with a fused ReLU stay as they are.
// CHECK-LABEL: func.func @not_scalar
// CHECK:         "top.Add"({{.*}}name = "bcast"
// CHECK:         "top.Add"({{.*}}name = "coeff"
// CHECK:         "top.AddConst"({{.*}}name = "a1"
// CHECK:         "top.AddConst"({{.*}}name = "a2"
module {
  func.func @not_scalar(%arg0: tensor<4xf32>) -> tensor<1x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<4xf32>) -> tensor<4xf32>
    %c = "top.Weight"() {name = "one", value = dense<1.0> : tensor<1x1xf32>} : () -> tensor<1x1xf32>
    %1 = "top.Add"(%0, %c) {name = "bcast"} : (tensor<4xf32>, tensor<1x1xf32>) -> tensor<1x4xf32>
    %2 = "top.Add"(%1, %c) {name = "coeff", coeff = [1.0, 2.0]} : (tensor<1x4xf32>, tensor<1x1xf32>) -> tensor<1x4xf32>
    %3 = "top.AddConst"(%2) {name = "a1", const_val = 1.0, do_relu = true} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %4 = "top.AddConst"(%3) {name = "a2", const_val = 1.0} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    func.return %4 : tensor<1x4xf32>
  }
}
