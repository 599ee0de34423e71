// convert-top-to-tpu{float_epilogue=false} (what model_deploy.py --codegen
// native runs): an INT8 conv whose only reader runs in float (the LRN falls
// back to F32 on bm1684x) requantizes to its int8 range and a Cast
// dequantizes, as TPU-MLIR lowers it; by default the conv dequantizes its
// int32 accumulator to f32 itself. A matmul keeps the epilogue either way.
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu{float_epilogue=false}' 2>/dev/null | filecheck %s --check-prefix=OFF
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s --check-prefix=ON

// OFF:      "tpu.Conv2D"{{.*}}name = "conv"{{.*}} -> tensor<1x3x2x2x!quant.uniform<i8:f32, 0.02>>
// OFF-NEXT: "tpu.Cast"{{.*}} -> tensor<1x3x2x2xf32>
// OFF-NEXT: "tpu.LRN"
// OFF:      "tpu.MatMul"{{.*}}name = "mm"{{.*}} -> tensor<2x3xf32>
// OFF-NEXT: "tpu.Softmax"

// ON:       "tpu.Conv2D"{{.*}}name = "conv"{{.*}} -> tensor<1x3x2x2xf32>
// ON-NEXT:  "tpu.LRN"
// ON:       "tpu.MatMul"{{.*}}name = "mm"{{.*}} -> tensor<2x3xf32>

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x2x2xf32>, %arg1: tensor<2x2xf32>) -> (tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>, tensor<2x3x!quant.calibrated<f32<0.0:1.0>>>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2x!quant.calibrated<f32<-1.27:1.27>>>
    %1 = "top.Weight"() {name = "w", value = dense<[[[[0.5]], [[-0.2]]], [[[0.0]], [[0.0]]], [[[-2.5]], [[1.0]]]]> : tensor<3x2x1x1xf32>} : () -> tensor<3x2x1x1xf32>
    %2 = "top.Weight"() {name = "b", value = dense<[0.05, 0.3, -0.1]> : tensor<3xf32>} : () -> tensor<3xf32>
    %3 = "top.Conv"(%0, %1, %2) {name = "conv", kernel_shape = [1, 1], strides = [1, 1]} : (tensor<1x2x2x2x!quant.calibrated<f32<-1.27:1.27>>>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>
    %4 = "top.LRN"(%3) {name = "lrn", size = 3 : i64, alpha = 1.0e-04 : f64, beta = 7.5e-01 : f64, bias = 1.0 : f64} : (tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>) -> tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>
    %5 = "top.Input"(%arg1) {name = "a"} : (tensor<2x2xf32>) -> tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>
    %6 = "top.Weight"() {name = "m", value = dense<[[1.25, -0.1, 0.0], [0.5, 2.5, 0.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
    %7 = "top.None"() : () -> none
    %8 = "top.MatMul"(%5, %6, %7) {name = "mm"} : (tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>, tensor<2x3xf32>, none) -> tensor<2x3x!quant.calibrated<f32<-5.08:5.08>>>
    %9 = "top.Softmax"(%8) {name = "s", axis = 1 : i64} : (tensor<2x3x!quant.calibrated<f32<-5.08:5.08>>>) -> tensor<2x3x!quant.calibrated<f32<0.0:1.0>>>
    func.return %4, %9 : tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>, tensor<2x3x!quant.calibrated<f32<0.0:1.0>>>
  }
}
