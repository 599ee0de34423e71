// RUN: not tpuc-opt %s -p shape-infer 2>&1 | filecheck %s

// CHECK: error: shape-infer: top.Conv 'conv1': input has 3 channels but filter [8, 4, 3, 3] with group 1 expects 4
module {
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<*xf32> {
    %0 = "top.Weight"() {name = "w"} : () -> tensor<8x4x3x3xf32>
    %1 = "top.None"() : () -> none
    %2 = "top.Conv"(%arg0, %0, %1) {name = "conv1", kernel_shape = [3, 3]} : (tensor<1x3x8x8xf32>, tensor<8x4x3x3xf32>, none) -> tensor<*xf32>
    func.return %2 : tensor<*xf32>
  }
}
