// An INT8 Concat's input made for it alone takes the Concat's range: the
// Add, and the Sigmoid's lookup table, which then maps straight onto the
// Concat's grid (one rounding, not two); each is a plain copy (multiplier
// 1, rshift 0). `shared` is also read by a Relu, so it keeps its own range
// and the Concat requantizes it (bm1684x's MulShift, 128 >> 8); the Input x
// has the Concat's range already.
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' | filecheck %s

// CHECK:      "tpu.Add"{{.*}} {name = "own"{{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.047244094488188976>>
// CHECK:      "tpu.Sub"{{.*}} {name = "shared"{{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.023622047244094488>>
// CHECK:      "tpu.Lut"{{.*}} {name = "sig"}{{.*}} -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.047244094488188976>>
// CHECK:      "tpu.Concat"{{.*}} {name = "cat_i8", axis = 1 : i64, multiplier = [1 : i64, 128 : i64, 1 : i64, 1 : i64], rshift = [0 : i64, 8 : i64, 0 : i64, 0 : i64]

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x4x4xf32>, %arg1: tensor<1x2x4x4xf32>, %arg2: tensor<1x2x4x4xf32>) -> (tensor<1x8x4x4x!quant.calibrated<f32<-6.0:6.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>>) {
    %a = "top.Input"(%arg0) {name = "a"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.calibrated<f32<-4.0:4.0>>>
    %b = "top.Input"(%arg1) {name = "b"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>
    %x = "top.Input"(%arg2) {name = "x"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.calibrated<f32<-6.0:6.0>>>
    %own = "top.Add"(%a, %b) {name = "own"} : (tensor<1x2x4x4x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<-3.0:3.0>>>
    %shared = "top.Sub"(%a, %b) {name = "shared"} : (tensor<1x2x4x4x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<-3.0:3.0>>>
    %relu = "top.Relu"(%shared) {name = "relu"} : (tensor<1x2x4x4x!quant.calibrated<f32<-3.0:3.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>>
    %sig = "top.Sigmoid"(%x) {name = "sig"} : (tensor<1x2x4x4x!quant.calibrated<f32<-6.0:6.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>>
    %cat = "top.Concat"(%own, %shared, %x, %sig) {name = "cat", axis = 1} : (tensor<1x2x4x4x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<-6.0:6.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>>) -> tensor<1x8x4x4x!quant.calibrated<f32<-6.0:6.0>>>
    func.return %cat, %relu : tensor<1x8x4x4x!quant.calibrated<f32<-6.0:6.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>>
  }
}
