// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// Flatten / Squeeze / Unsqueeze with static shapes become Reshape, and a chain of
// Reshapes reads the original tensor; the last op's name stays.
// CHECK-LABEL: func.func @chain
// CHECK:         %[[X:.*]] = "top.Input"
// CHECK-NEXT:    %[[R:.*]] = "top.Reshape"(%[[X]]) {name = "unsq", shape = [1 : i64, 1 : i64, 24 : i64]} : (tensor<1x2x3x4xf32>) -> tensor<1x1x24xf32>
// CHECK-NEXT:    func.return %[[R]]
module {
  func.func @chain(%arg0: tensor<1x2x3x4xf32>) -> tensor<1x1x24xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
    %1 = "top.Flatten"(%0) {name = "flat", start_dim = 1 : i64} : (tensor<1x2x3x4xf32>) -> tensor<1x24xf32>
    %2 = "top.Squeeze"(%1) {name = "sq", axes = [0]} : (tensor<1x24xf32>) -> tensor<24xf32>
    %3 = "top.Unsqueeze"(%2) {name = "unsq", axes = [0, 1]} : (tensor<24xf32>) -> tensor<1x1x24xf32>
    func.return %3 : tensor<1x1x24xf32>
  }
}

// -----

// Result types not inferred yet: the shape attribute is computed from the input.
// CHECK-LABEL: func.func @unranked_result
// CHECK:         "top.Reshape"(%{{.*}}) {name = "flat", shape = [6 : i64, 4 : i64]} : (tensor<2x3x4xf32>) -> tensor<*xf32>
module {
  func.func @unranked_result(%arg0: tensor<2x3x4xf32>) -> tensor<*xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    %1 = "top.Flatten"(%0) {name = "flat", start_dim = 0 : i64, end_dim = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
    func.return %1 : tensor<*xf32>
  }
}

// -----

// A Reshape to the input's own shape is removed.
// CHECK-LABEL: func.func @same_shape
// CHECK-NOT:     top.Reshape
// CHECK:         "top.Sigmoid"(%{{.*}}) {name = "sig"}
module {
  func.func @same_shape(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "top.Reshape"(%0) {name = "r", shape = [2, 3]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "top.Sigmoid"(%1) {name = "sig"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %2 : tensor<2x3xf32>
  }
}

// -----

// The inner Reshape of a chain stays when something else reads it.
// CHECK-LABEL: func.func @inner_used
// CHECK:         %[[X:.*]] = "top.Input"
// CHECK:         %[[A:.*]] = "top.Reshape"(%[[X]]) {name = "r1"
// CHECK:         %[[B:.*]] = "top.Reshape"(%[[X]]) {name = "r2"
// CHECK:         func.return %[[A]], %[[B]]
module {
  func.func @inner_used(%arg0: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x2xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "top.Reshape"(%0) {name = "r1", shape = [6]} : (tensor<2x3xf32>) -> tensor<6xf32>
    %2 = "top.Reshape"(%1) {name = "r2", shape = [3, 2]} : (tensor<6xf32>) -> tensor<3x2xf32>
    func.return %1, %2 : tensor<6xf32>, tensor<3x2xf32>
  }
}
