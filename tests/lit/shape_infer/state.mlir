// RUN: not tpuc-opt %s -p shape-infer 2>&1 | filecheck %s

// CHECK: error: shape-infer: module is in state TPU_LOWERED, needs TOP_F32 or TOP_CALIBRATED; it has already gone past this step
// CHECK-NOT: Traceback
module @m attributes {module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x3xf32>) -> tensor<*xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x3xf32>) -> tensor<*xf32>
    func.return %0 : tensor<*xf32>
  }
}
