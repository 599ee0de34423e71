// RUN: not tpuc-opt %s -p shape-infer 2>&1 | filecheck %s

// A reshape that changes the element count fails with one line naming the
// op and its tensor.
// CHECK: error: shape-infer: top.Reshape 'bad_reshape': cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)
// CHECK-NOT: Traceback
module {
  func.func @main(%arg0: tensor<2x3x4xf32>) -> tensor<*xf32> {
    %0 = "top.Reshape"(%arg0) {name = "bad_reshape", shape = [5, 5]} : (tensor<2x3x4xf32>) -> tensor<*xf32>
    func.return %0 : tensor<*xf32>
  }
}
