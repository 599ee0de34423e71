// INT8 lowering of elementwise, table and data-movement ops. The book's Add
// (thresholds 4, 2 -> 5) takes multipliers 0.8 and 0.4: on cv183x 8-bit
// (102, 51) on one rshift 7 (the sum rounded once); on bm1684x an unsigned
// 8-bit multiplier and rshift per input, 205 >> 8 and 205 >> 9, each term
// rounded half up (its bcbinary's u8 scales and shifts); asymmetric, one
// rshift on the sum again: (205, 102) >> 8. The Concat's rescale of a by
// 4/5 likewise: cv183x 102 >> 7, bm1684x the chip's MulShift 205 >> 8 half up.
// RUN: tpuc-opt %s -p 'processor-assign{chip="cv183x" mode="INT8"},convert-top-to-tpu' | filecheck %s --check-prefix=CV
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' | filecheck %s --check-prefix=BM
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu{asymmetric=true}' | filecheck %s --check-prefix=ASYM

// CV:      %[[A:.*]] = "tpu.Cast"(%{{.*}}) {name = "a_i8"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.uniform<i8:f32, 0.031496062992125984>>
// CV:      %[[B:.*]] = "tpu.Cast"(%{{.*}}) {name = "b_i8"}
// CV:      %[[ADD:.*]] = "tpu.Add"(%[[A]], %[[B]]) {name = "add_i8", multiplier = [102 : i64, 51 : i64], rshift = [7 : i64], round_mode = "HalfAwayFromZero"}
// CV-SAME:   -> tensor<1x4x!quant.uniform<i8:f32, 0.03937007874015748>>
// CV:      "tpu.Mul"(%[[A]], %[[B]]) {name = "mul_i8", multiplier = [65 : i64], rshift = [13 : i64]
// CV:      "tpu.Concat"(%[[A]], %[[ADD]]) {name = "cat_i8", axis = 1 : i64, multiplier = [102 : i64, 1 : i64], rshift = [7 : i64, 0 : i64]
// Function outputs leave through a Cast to f32 that takes their name.
// The Relu table maps i8 input values to u8 outputs ([0, 4] calibrated).
// CV:      %[[T:.*]] = "top.Weight"() {name = "relu_table"} : () -> tensor<256x!quant.uniform<u8:f32, 0.01568627450980392>>
// CV:      "tpu.Lut"(%[[A]], %[[T]]) {name = "relu_u8"} : {{.*}} -> tensor<1x4x!quant.uniform<u8:f32, 0.01568627450980392>>
// Pass-through ops keep their input's type; Pad's value 1.0 is quantized
// with it (1.0 / (4/127) = 31.75 -> 32).
// CV:      "tpu.Reshape"(%[[A]]) {name = "rs_i8", shape = [4 : i64]} : {{.*}} -> tensor<4x!quant.uniform<i8:f32, 0.031496062992125984>>
// CV:      "tpu.Pad"(%[[A]]) {name = "pad_i8", paddings = [0 : i64, 1 : i64, 0 : i64, 1 : i64], val = 3.200000e+01 : f64} : {{.*}} -> tensor<1x6x!quant.uniform<i8:f32, 0.031496062992125984>>
// Softmax has no INT8 form: cv183x runs it in BF16.
// CV:      "tpu.Softmax"(%{{.*}}) {name = "sm_bf16"{{.*}} -> tensor<1x4xbf16>

// BM:      "tpu.Add"{{.*}} {name = "add_i8", multiplier = [205 : i64, 205 : i64], rshift = [8 : i64, 9 : i64], round_mode = "HalfUp"}
// BM:      "tpu.Mul"{{.*}} {name = "mul_i8", multiplier = [129 : i64], rshift = [14 : i64], round_mode = "HalfUp"
// BM:      "tpu.Concat"{{.*}} {name = "cat_i8", axis = 1 : i64, multiplier = [205 : i64, 1 : i64], rshift = [8 : i64, 0 : i64], round_mode = "HalfUp"
// BM:      "tpu.Softmax"(%{{.*}}) {name = "sm"{{.*}} -> tensor<1x4xf32>

// Asymmetric: Z_a = round(-128 + 4/S) = -1 with S = 8/255; the fill value
// 1.0 becomes round(31.875) - 1 = 31.
// ASYM:    "tpu.Cast"(%{{.*}}) {name = "a_i8"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.uniform<i8:f32, 0.03137254901960784:-1>>
// ASYM:    "tpu.Add"{{.*}} {name = "add_i8", multiplier = [205 : i64, 102 : i64], rshift = [8 : i64]
// ASYM:    "tpu.Pad"{{.*}}val = 3.100000e+01 : f64

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x4xf32>, %arg1: tensor<1x4xf32>) -> (tensor<1x4x!quant.calibrated<f32<-5.0:5.0>>>, tensor<1x4x!quant.calibrated<f32<-8.0:8.0>>>, tensor<1x8x!quant.calibrated<f32<-5.0:5.0>>>, tensor<1x4x!quant.calibrated<f32<0.0:4.0>>>, tensor<4x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x6x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x4x!quant.calibrated<f32<0.0:1.0>>>) {
    %a = "top.Input"(%arg0) {name = "a"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>
    %b = "top.Input"(%arg1) {name = "b"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>>
    %add = "top.Add"(%a, %b) {name = "add"} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x!quant.calibrated<f32<-5.0:5.0>>>
    %mul = "top.Mul"(%a, %b) {name = "mul"} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x!quant.calibrated<f32<-8.0:8.0>>>
    %cat = "top.Concat"(%a, %add) {name = "cat", axis = 1} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x4x!quant.calibrated<f32<-5.0:5.0>>>) -> tensor<1x8x!quant.calibrated<f32<-5.0:5.0>>>
    %relu = "top.Relu"(%a) {name = "relu"} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x4x!quant.calibrated<f32<0.0:4.0>>>
    %rs = "top.Reshape"(%a) {name = "rs", shape = [4]} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<4x!quant.calibrated<f32<-3.0:3.0>>>
    %pad = "top.Pad"(%a) {name = "pad", paddings = [0, 1, 0, 1], val = 1.0} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x6x!quant.calibrated<f32<-4.0:4.0>>>
    %sm = "top.Softmax"(%a) {name = "sm", axis = 1} : (tensor<1x4x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x4x!quant.calibrated<f32<0.0:1.0>>>
    func.return %add, %mul, %cat, %relu, %rs, %pad, %sm : tensor<1x4x!quant.calibrated<f32<-5.0:5.0>>>, tensor<1x4x!quant.calibrated<f32<-8.0:8.0>>>, tensor<1x8x!quant.calibrated<f32<-5.0:5.0>>>, tensor<1x4x!quant.calibrated<f32<0.0:4.0>>>, tensor<4x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x6x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x4x!quant.calibrated<f32<0.0:1.0>>>
  }
}
