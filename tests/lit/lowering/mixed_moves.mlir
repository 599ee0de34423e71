// Data movement the qtable does not name runs in its neighbours' float
// mode (bm1684x, INT8 module; Softmax has no INT8 rule and runs in F32):
// - `r1` sits between an INT8 MatMul and the float Softmax: it takes F32,
//   so the MatMul hands its accumulator to it in f32 (float epilogue) and
//   no int8 result is made;
// - `r2` reads the Softmax: it follows it in F32 instead of rounding the
//   scores to the Softmax's u8 grid; no Cast is left between them.
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s

// CHECK:      "tpu.MatMul"{{.*}}name = "mm"{{.*}} -> tensor<2x2xf32>
// CHECK-NEXT: "tpu.Reshape"{{.*}}name = "r1"{{.*}} -> tensor<1x4xf32>
// CHECK-NEXT: "tpu.Softmax"{{.*}}name = "s"{{.*}} -> tensor<1x4xf32>
// CHECK-NEXT: "tpu.Reshape"{{.*}}name = "r2"{{.*}} -> tensor<2x2xf32>
// CHECK-NOT:  "tpu.Cast"

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<2x2xf32>) -> tensor<2x2x!quant.calibrated<f32<0.0:1.0>>> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x2xf32>) -> tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>
    %1 = "top.Weight"() {name = "w", value = dense<[[1.25, -0.5], [0.5, 2.5]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.MatMul"(%0, %1, %2) {name = "mm"} : (tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>, tensor<2x2xf32>, none) -> tensor<2x2x!quant.calibrated<f32<-5.08:5.08>>>
    %4 = "top.Reshape"(%3) {name = "r1", shape = [1, 4]} : (tensor<2x2x!quant.calibrated<f32<-5.08:5.08>>>) -> tensor<1x4x!quant.calibrated<f32<-5.08:5.08>>>
    %5 = "top.Softmax"(%4) {name = "s", axis = 1 : i64} : (tensor<1x4x!quant.calibrated<f32<-5.08:5.08>>>) -> tensor<1x4x!quant.calibrated<f32<0.0:1.0>>>
    %6 = "top.Reshape"(%5) {name = "r2", shape = [2, 2]} : (tensor<1x4x!quant.calibrated<f32<0.0:1.0>>>) -> tensor<2x2x!quant.calibrated<f32<0.0:1.0>>>
    func.return %6 : tensor<2x2x!quant.calibrated<f32<0.0:1.0>>>
  }
}
