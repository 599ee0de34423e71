// An INT8 MatMul whose only reader runs in float (Softmax falls back to F32
// on bm1684x) dequantizes its int32 accumulator straight to f32 at scale
// S_in·S_w per column, with no int8 result and no Cast; cv183x (8-bit
// multipliers) keeps the int8 result and casts it to bf16.
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s --check-prefix=BM
// RUN: tpuc-opt %s -p 'processor-assign{chip="cv183x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s --check-prefix=CV

// 0.01·1.25/127 = (102.4/127)·2^-13 and 0.01·2.5/127 = (102.4/127)·2^-12; 2^31·102.4/127 = 1731514373.5
// BM:      "tpu.MatMul"{{.*}}name = "mm"{{.*}}multiplier = [1731514374 : i64, 1731514374 : i64], rshift = [44 : i64, 43 : i64]
// BM-SAME: -> tensor<2x2xf32>
// BM-NEXT: "tpu.Softmax"
// BM-NOT:  "tpu.Cast"

// CV:      "tpu.MatMul"{{.*}} -> tensor<2x2x!quant.uniform<i8:f32, 0.04>>
// CV-NEXT: "tpu.Cast"{{.*}} -> tensor<2x2xbf16>

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<2x2xf32>) -> tensor<2x2x!quant.calibrated<f32<0.0:1.0>>> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x2xf32>) -> tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>
    %1 = "top.Weight"() {name = "w", value = dense<[[1.25, -0.5], [0.5, 2.5]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.MatMul"(%0, %1, %2) {name = "mm"} : (tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>, tensor<2x2xf32>, none) -> tensor<2x2x!quant.calibrated<f32<-5.08:5.08>>>
    %4 = "top.Softmax"(%3) {name = "s", axis = 1 : i64} : (tensor<2x2x!quant.calibrated<f32<-5.08:5.08>>>) -> tensor<2x2x!quant.calibrated<f32<0.0:1.0>>>
    func.return %4 : tensor<2x2x!quant.calibrated<f32<0.0:1.0>>>
  }
}
