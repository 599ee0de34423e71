// weight-reorder: 2-D conv filters [oc, ic/g, kh, kw] become [1, oc, ic/g, kh*kw]
// (same bytes); INT8 Conv2D/Deconv (quantized input) get one i32 weight
// [1, oc, 1, 3] = [bias, multiplier, rshift] per channel in place of the bias,
// and coeff_merged = true; replaced weights leave the IR and the weight file.
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: tpuc-opt %s -p weight-reorder --weight-output w.npz -o out.mlir
// RUN: filecheck %s --check-prefix=IR < out.mlir
// RUN: not grep -E 'name = "(w|b|dww|ew|eb|fw)"' out.mlir
// RUN: %python -c "import numpy as np; d = np.load('w.npz'); print(sorted(d.files)); [print(k, d[k].dtype, list(d[k].shape), d[k].ravel().tolist()) for k in sorted(d.files)]" | filecheck %s --check-prefix=NPZ
// Twice is an error: the module has gone past this step.
// RUN: not tpuc-opt %s -p weight-reorder,weight-reorder 2>&1 | filecheck %s --check-prefix=TWICE

// IR:      module.state = "TPU_REORDERED"
// IR:      "top.Weight"() {name = "conv_filter_reordered"} : () -> tensor<1x3x2x4xsi8>
// IR-NEXT: "top.Weight"() {name = "conv_coeff_merged"} : () -> tensor<1x3x1x3xi32>
// IR-NEXT: "tpu.Conv2D"{{.*}}name = "conv"{{.*}}multiplier = [3 : i64, 4 : i64, 5 : i64], rshift = [1 : i64, 2 : i64, 3 : i64]{{.*}}coeff_merged = true
// IR:      "top.Weight"() {name = "dw_filter_reordered"} : () -> tensor<1x3x1x1xsi8>
// IR-NEXT: "top.Weight"() {name = "dw_coeff_merged"} : () -> tensor<1x3x1x3xi32>
// IR-NEXT: "tpu.Conv2D"{{.*}}name = "dw"{{.*}}coeff_merged = true
// IR:      "top.Weight"() {name = "epi_coeff_merged"} : () -> tensor<1x2x1x3xi32>
// IR-NEXT: "tpu.Conv2D"{{.*}}name = "epi"{{.*}}coeff_merged = true{{.*}} -> tensor<1x2x4x4xf32>
// IR:      "top.Weight"() {name = "fconv_filter_reordered"} : () -> tensor<1x2x2x4xf32>
// IR-NEXT: "tpu.Conv2D"(%{{.*}}, %{{.*}}, %[[FB:.*]]) {name = "fconv"
// IR-NOT:  coeff_merged
// IR-SAME: (tensor<1x2x4x4xf32>, tensor<1x2x2x4xf32>, tensor<2xf32>)
// IR:      "top.Weight"() {name = "dec_coeff_merged"} : () -> tensor<1x4x1x3xi32>
// IR-NEXT: "tpu.Deconv"(%{{.*}}, %[[DW:.*]], %{{.*}}){{.*}}coeff_merged = true{{.*}}tensor<2x2x1x1xsi8>, tensor<1x4x1x3xi32>

// The filters keep their bytes in order; dw has no bias (0) and one
// multiplier/rshift for all channels; epi dequantizes to f32 (float epilogue).
// NPZ: ['conv_coeff_merged', 'conv_filter_reordered', 'dec_coeff_merged', 'dw_coeff_merged', 'dw_filter_reordered', 'epi_coeff_merged', 'epi_filter_reordered', 'fconv_filter_reordered']
// NPZ: conv_coeff_merged int32 [1, 3, 1, 3] [5, 3, 1, -7, 4, 2, 9, 5, 3]
// NPZ: conv_filter_reordered int8 [1, 3, 2, 4] [1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8, 9, 10, 11, 12, 13, 14, 15, 16]
// NPZ: dec_coeff_merged int32 [1, 4, 1, 3] [1, 7, 0, 2, 7, 0, 3, 7, 0, 4, 7, 0]
// NPZ: dw_coeff_merged int32 [1, 3, 1, 3] [0, 100, 7, 0, 100, 7, 0, 100, 7]
// NPZ: dw_filter_reordered int8 [1, 3, 1, 1] [1, -2, 3]
// NPZ: epi_coeff_merged int32 [1, 2, 1, 3] [-4, 1073741824, 40, 6, 1207959552, 41]
// NPZ: epi_filter_reordered int8 [1, 2, 2, 1] [1, 2, 3, 4]
// NPZ: fconv_filter_reordered float32 [1, 2, 2, 4] [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0, -3.5, -4.0]

// TWICE: error: weight-reorder: module is in state TPU_REORDERED, needs TPU_LOWERED; it has already gone past this step

builtin.module attributes {module.state = "TPU_LOWERED", module.chip = "bm1684x"} {
  func.func @main(%arg0: tensor<1x2x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x4x4x4xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %1 = "tpu.Cast"(%0) {name = "x_i8"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.01>>
    %none = "top.None"() : () -> none
    %w = "top.Weight"() {name = "w", value = dense<[[[[1, 2], [3, 4]], [[5, 6], [7, 8]]], [[[-1, -2], [-3, -4]], [[-5, -6], [-7, -8]]], [[[9, 10], [11, 12]], [[13, 14], [15, 16]]]]> : tensor<3x2x2x2xsi8>} : () -> tensor<3x2x2x2xsi8>
    %b = "top.Weight"() {name = "b", value = dense<[5, -7, 9]> : tensor<3xi32>} : () -> tensor<3xi32>
    %2 = "tpu.Conv2D"(%1, %w, %b) {name = "conv", kernel_shape = [2, 2], pads = [0, 0, 1, 1], multiplier = [3, 4, 5], rshift = [1, 2, 3]} : (tensor<1x2x4x4x!quant.uniform<i8:f32, 0.01>>, tensor<3x2x2x2xsi8>, tensor<3xi32>) -> tensor<1x3x4x4x!quant.uniform<i8:f32, 0.02>>
    %dww = "top.Weight"() {name = "dww", value = dense<[[[[1]]], [[[-2]]], [[[3]]]]> : tensor<3x1x1x1xsi8>} : () -> tensor<3x1x1x1xsi8>
    %3 = "tpu.Conv2D"(%2, %dww, %none) {name = "dw", kernel_shape = [1, 1], group = 3, multiplier = [100], rshift = [7]} : (tensor<1x3x4x4x!quant.uniform<i8:f32, 0.02>>, tensor<3x1x1x1xsi8>, none) -> tensor<1x3x4x4x!quant.uniform<i8:f32, 0.02>>
    %4 = "tpu.Cast"(%3) {name = "y"} : (tensor<1x3x4x4x!quant.uniform<i8:f32, 0.02>>) -> tensor<1x3x4x4xf32>
    %ew = "top.Weight"() {name = "ew", value = dense<[[[[1]], [[2]]], [[[3]], [[4]]]]> : tensor<2x2x1x1xsi8>} : () -> tensor<2x2x1x1xsi8>
    %eb = "top.Weight"() {name = "eb", value = dense<[-4, 6]> : tensor<2xi32>} : () -> tensor<2xi32>
    %5 = "tpu.Conv2D"(%1, %ew, %eb) {name = "epi", kernel_shape = [1, 1], multiplier = [1073741824, 1207959552], rshift = [40, 41]} : (tensor<1x2x4x4x!quant.uniform<i8:f32, 0.01>>, tensor<2x2x1x1xsi8>, tensor<2xi32>) -> tensor<1x2x4x4xf32>
    %fw = "top.Weight"() {name = "fw", value = dense<[[[[0.5, 1.0], [1.5, 2.0]], [[2.5, 3.0], [3.5, 4.0]]], [[[-0.5, -1.0], [-1.5, -2.0]], [[-2.5, -3.0], [-3.5, -4.0]]]]> : tensor<2x2x2x2xf32>} : () -> tensor<2x2x2x2xf32>
    %fb = "top.Weight"() {name = "fb", value = dense<[0.25, -0.25]> : tensor<2xf32>} : () -> tensor<2xf32>
    %6 = "tpu.Conv2D"(%5, %fw, %fb) {name = "fconv", kernel_shape = [2, 2], pads = [0, 0, 1, 1]} : (tensor<1x2x4x4xf32>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
    %dw2 = "top.Weight"() {name = "decw", value = dense<[[[[1]], [[2]]], [[[3]], [[4]]]]> : tensor<2x2x1x1xsi8>} : () -> tensor<2x2x1x1xsi8>
    %db = "top.Weight"() {name = "decb", value = dense<[1, 2, 3, 4]> : tensor<4xi32>} : () -> tensor<4xi32>
    %7 = "tpu.Deconv"(%1, %dw2, %db) {name = "dec", kernel_shape = [1, 1], group = 2, multiplier = [7], rshift = [0]} : (tensor<1x2x4x4x!quant.uniform<i8:f32, 0.01>>, tensor<2x2x1x1xsi8>, tensor<4xi32>) -> tensor<1x4x4x4x!quant.uniform<i8:f32, 0.02>>
    %8 = "tpu.Cast"(%7) {name = "d"} : (tensor<1x4x4x4x!quant.uniform<i8:f32, 0.02>>) -> tensor<1x4x4x4xf32>
    func.return %4, %6, %8 : tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x4x4x4xf32>
  }
}
