// RUN: tpuc-opt %s -p canonicalize | filecheck %s

// Unused weights and `top.None` are erased; an unused graph input stays.
// CHECK-LABEL: func.func @main
// CHECK:         "top.Input"(%arg0) {name = "x"}
// CHECK:         "top.Input"(%arg1) {name = "unused_input"}
// CHECK-NOT:     top.Weight
// CHECK-NOT:     top.None
// CHECK:         "top.Sigmoid"
module {
  func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "top.Input"(%arg1) {name = "unused_input"} : (tensor<2xf32>) -> tensor<2xf32>
    %2 = "top.Weight"() {name = "unused", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
    %3 = "top.None"() : () -> none
    %4 = "top.Sigmoid"(%0) {name = "s"} : (tensor<2xf32>) -> tensor<2xf32>
    func.return %4 : tensor<2xf32>
  }
}
