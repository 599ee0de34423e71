// A move the qtable does not name, between a float producer and INT8
// readers only, runs in INT8 (bm1684x, INT8 module; Softmax has no INT8
// rule and runs in F32): the Cast to int8 comes first and `r` and `p`
// move int8 bytes, a quarter of the f32 ones (ppocr_rec's transpose_50).
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s

// CHECK:      "tpu.Softmax"{{.*}}name = "s"{{.*}} -> tensor<1x4xf32>
// CHECK-NEXT: "tpu.Cast"{{.*}} -> tensor<1x4x!quant.uniform<i8:f32, {{.*}}>>
// CHECK-NEXT: "tpu.Reshape"{{.*}}name = "r"{{.*}} -> tensor<2x2x!quant.uniform<i8:f32, {{.*}}>>
// CHECK-NEXT: "tpu.Permute"{{.*}}name = "p"{{.*}} -> tensor<2x2x!quant.uniform<i8:f32, {{.*}}>>
// CHECK-NOT:  "tpu.Cast"
// CHECK:      "tpu.MatMul"{{.*}}name = "mm_i8"

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<2x2x!quant.calibrated<f32<-3.81:3.81>>> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.calibrated<f32<-1.27:1.27>>>
    %1 = "top.Softmax"(%0) {name = "s", axis = 1 : i64} : (tensor<1x4x!quant.calibrated<f32<-1.27:1.27>>>) -> tensor<1x4x!quant.calibrated<f32<-1.0:1.0>>>
    %2 = "top.Reshape"(%1) {name = "r", shape = [2, 2]} : (tensor<1x4x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<2x2x!quant.calibrated<f32<-1.0:1.0>>>
    %3 = "top.Permute"(%2) {name = "p", order = [1, 0]} : (tensor<2x2x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<2x2x!quant.calibrated<f32<-1.0:1.0>>>
    %4 = "top.Weight"() {name = "w", value = dense<[[1.25, -0.5], [0.5, 2.5]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
    %5 = "top.None"() : () -> none
    %6 = "top.MatMul"(%3, %4, %5) {name = "mm"} : (tensor<2x2x!quant.calibrated<f32<-1.0:1.0>>>, tensor<2x2xf32>, none) -> tensor<2x2x!quant.calibrated<f32<-3.81:3.81>>>
    func.return %6 : tensor<2x2x!quant.calibrated<f32<-3.81:3.81>>>
  }
}
