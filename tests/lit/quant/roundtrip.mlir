// RUN: tpuc-opt %s | filecheck %s
// RUN: tpuc-opt %s | tpuc-opt | filecheck %s

// The quant types print as MLIR's quant dialect does: default storage ranges
// and zero points are left out, floats take their shortest round-trip form.
// CHECK-LABEL: func.func @calibrated(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.833771>>>
// CHECK:         "top.Input"(%arg0) {name = "in"} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x!quant.calibrated<f32<-0.99999:0.99999>>>
// CHECK:         "top.Conv"{{.*}} -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.833771>>>
// CHECK-LABEL: func.func @lowered(%arg0: tensor<1x16x!quant.uniform<i8:f32, 0.0078740157480315>>) -> tensor<1x16x!quant.uniform<u8:f32, 0.015:128>>
// CHECK:         "top.Relu"{{.*}} -> tensor<1x16x!quant.uniform<u8:f32, 0.015:128>>
// CHECK:         "top.Weight"() {name = "w8"} : () -> tensor<4x16x!quant.uniform<i8<-127:127>:f32:0, {0.1,0.2,0.3:-1,0.4}>>
// CHECK:         "top.Weight"() {name = "w16"} : () -> tensor<4x!quant.uniform<i16:f32, 200.0:-3>>
// CHECK:         "top.Weight"() {name = "b32"} : () -> tensor<4x!quant.uniform<i32:f16, 1.0e-05>>
module {
  func.func @calibrated(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.8337710>>> {
    %0 = "top.Input"(%arg0) {name = "in"} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x!quant.calibrated<f32<-0.99999:0.99999>>>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<4x3x3x3xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.Conv"(%0, %1, %2) {name = "conv", kernel_shape = [3, 3], pads = [1, 1, 1, 1], do_relu = true} : (tensor<1x3x8x8x!quant.calibrated<f32<-0.99999:0.99999>>>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.8337710>>>
    func.return %3 : tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.8337710>>>
  }
  func.func @lowered(%arg0: tensor<1x16x!quant.uniform<i8:f32, 0.0078740157480315>>) -> tensor<1x16x!quant.uniform<u8:f32, 0.015:128>> {
    %0 = "top.Relu"(%arg0) {name = "r"} : (tensor<1x16x!quant.uniform<i8:f32, 0.0078740157480315>>) -> tensor<1x16x!quant.uniform<u8<0:255>:f32, 0.015:128>>
    %1 = "top.Weight"() {name = "w8"} : () -> tensor<4x16x!quant.uniform<i8<-127:127>:f32:0, {0.1,0.2,3.0e-1:-1,0.4:0}>>
    %2 = "top.Weight"() {name = "w16"} : () -> tensor<4x!quant.uniform<i16:f32, 2.0e+2:-3>>
    %3 = "top.Weight"() {name = "b32"} : () -> tensor<4x!quant.uniform<i32:f16, 0.00001>>
    func.return %0 : tensor<1x16x!quant.uniform<u8:f32, 0.015:128>>
  }
}
