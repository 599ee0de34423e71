// INT8 lowering of Conv, AvgPool and MatMul: per-output-channel int8 filters
// (S_w = max|w_c|/127), int32 biases at S_in·S_w, and the requant scale
// S_in·S_w/S_out as multiplier/rshift of the chip's width: 32-bit on bm1684x,
// 8-bit on cv183x. S_in = 0.01, conv S_out = 0.02, pool S_out = 0.005, matmul
// output after ReLU is u8 (symmetric) or i8 with zero point -128 (asymmetric).
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s --check-prefix=BM
// RUN: tpuc-opt %s -p 'processor-assign{chip="cv183x" mode="INT8"},convert-top-to-tpu' 2>/dev/null | filecheck %s --check-prefix=CV
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu{asymmetric=true}' 2>/dev/null | filecheck %s --check-prefix=ASYM
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' --weight-output w.npz -o out.mlir
// RUN: %python -c "import numpy as np; d = np.load('w.npz'); print(sorted((k, str(d[k].dtype), d[k].ravel().tolist()) for k in d.files))" | filecheck %s --check-prefix=NPZ

// Scales 0.25/127, 0.5 (all-zero channel: S_w = 1), 1.25/127 as Q31 mantissas.
// BM:      "tpu.Cast"(%{{.*}}) {name = "x_i8"} {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.01>>
// BM:      "tpu.Conv2D"{{.*}}name = "conv"{{.*}}multiplier = [1082196484 : i64, 1073741824 : i64, 1352745605 : i64], rshift = [39 : i64, 31 : i64, 37 : i64], round_mode = "HalfAwayFromZero"
// BM-SAME: (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.01>>, tensor<3x2x1x1xsi8>, tensor<3xi32>) -> tensor<1x3x2x2x!quant.uniform<i8:f32, 0.02>>
// 0.02/(0.005·4) = 1
// BM:      "tpu.Pool2D"{{.*}}pool_mode = "Avg", multiplier = [128 : i64], rshift = [7 : i64], round_mode = "HalfUp"
// BM-SAME: -> tensor<1x3x1x1x!quant.uniform<i8:f32, 0.005>>
// One right shift for the matmul's columns (the smallest): 1352745605 / 2^7, / 2^6 rounded.
// BM:      "tpu.MatMul"{{.*}}multiplier = [10568325 : i64, 21136650 : i64, 1073741824 : i64], rshift = [31 : i64, 31 : i64, 31 : i64]
// BM-SAME: (tensor<2x2x!quant.uniform<i8:f32, 0.01>>, tensor<2x3xsi8>, none) -> tensor<2x3x!quant.uniform<u8:f32, 0.0199{{[0-9]*}}>>

// CV:      "tpu.Conv2D"{{.*}}multiplier = [65 : i64, 64 : i64, 81 : i64], rshift = [15 : i64, 7 : i64, 13 : i64]
// CV:      "tpu.Pool2D"{{.*}}multiplier = [64 : i64], rshift = [6 : i64]
// CV:      "tpu.MatMul"{{.*}}multiplier = [81 : i64, 81 : i64, 64 : i64], rshift = [14 : i64, 13 : i64, 7 : i64]

// ASYM:    module.asymmetric = true
// ASYM:    "tpu.Cast"(%{{.*}}) {name = "x_i8"} {{.*}} -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.00996{{[0-9]*}}:-1>>
// ASYM:    "tpu.MatMul"{{.*}} -> tensor<2x3x!quant.uniform<i8:f32, 0.0199{{[0-9]*}}:-128>>

// -0.2/(0.5/127) = -50.8 -> -51; biases 0.05/(0.01·0.5/127) = 1270, 0.3/0.01 = 30, -0.1/(0.01·2.5/127) = -508
// NPZ: ('conv_bias_i32', 'int32', [1270, 30, -508]), ('conv_filter_i8', 'int8', [127, -51, 0, 0, -127, 51]), ('mm_filter_i8', 'int8', [127, -5, 0, 51, 127, 0])

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x2x2xf32>, %arg1: tensor<2x2xf32>) -> (tensor<1x3x1x1x!quant.calibrated<f32<-0.635:0.635>>>, tensor<2x3x!quant.calibrated<f32<0.0:5.1>>>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2x!quant.calibrated<f32<-1.27:1.27>>>
    %1 = "top.Weight"() {name = "w", value = dense<[[[[0.5]], [[-0.2]]], [[[0.0]], [[0.0]]], [[[-2.5]], [[1.0]]]]> : tensor<3x2x1x1xf32>} : () -> tensor<3x2x1x1xf32>
    %2 = "top.Weight"() {name = "b", value = dense<[0.05, 0.3, -0.1]> : tensor<3xf32>} : () -> tensor<3xf32>
    %3 = "top.Conv"(%0, %1, %2) {name = "conv", kernel_shape = [1, 1], strides = [1, 1]} : (tensor<1x2x2x2x!quant.calibrated<f32<-1.27:1.27>>>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>
    %4 = "top.AvgPool"(%3) {name = "pool", kernel_shape = [2, 2], strides = [2, 2]} : (tensor<1x3x2x2x!quant.calibrated<f32<-2.54:2.54>>>) -> tensor<1x3x1x1x!quant.calibrated<f32<-0.635:0.635>>>
    %5 = "top.Input"(%arg1) {name = "a"} : (tensor<2x2xf32>) -> tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>
    %6 = "top.Weight"() {name = "m", value = dense<[[1.25, -0.1, 0.0], [0.5, 2.5, 0.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
    %7 = "top.None"() : () -> none
    %8 = "top.MatMul"(%5, %6, %7) {name = "mm", do_relu = true} : (tensor<2x2x!quant.calibrated<f32<-1.27:1.27>>>, tensor<2x3xf32>, none) -> tensor<2x3x!quant.calibrated<f32<0.0:5.1>>>
    func.return %4, %8 : tensor<1x3x1x1x!quant.calibrated<f32<-0.635:0.635>>>, tensor<2x3x!quant.calibrated<f32<0.0:5.1>>>
  }
}
