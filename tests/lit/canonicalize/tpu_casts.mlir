// RUN: tpuc-opt %s -p canonicalize --split-input-file | filecheck %s

// Precision changes that cancel: a Cast to the type a value has, a
// dequantize -> quantize pair with one type (dropped) or two (one
// RequantInt named after the outer Cast), f16 -> f32 -> f16.
// CHECK-LABEL: func.func @cancel
// CHECK:         %[[X:.*]] = "top.Input"
// CHECK-NEXT:    %[[Q:.*]] = "tpu.Cast"(%[[X]]) {name = "x_i8"}
// CHECK-NEXT:    %[[R:.*]] = "tpu.RequantInt"(%[[Q]]) {name = "b_i8", multiplier = [1073741824 : i64], rshift = [29 : i64], round_mode = "HalfAwayFromZero"} : (tensor<4x!quant.uniform<i8:f32, 0.1>>) -> tensor<4x!quant.uniform<i8:f32, 0.05>>
// CHECK-NEXT:    %[[H:.*]] = "tpu.Cast"(%[[X]]) {name = "x_f16"}
// CHECK-NEXT:    %[[S:.*]] = "tpu.Concat"(%[[Q]], %[[R]], %[[H]])
// CHECK-NOT:     tpu.Cast
// CHECK:         func.return
builtin.module attributes {module.chip = "bm1684x"} {
  func.func @cancel(%arg0: tensor<4xf32>) -> tensor<12xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "tpu.Cast"(%0) {name = "x_i8"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
    %2 = "tpu.Cast"(%1) {name = "a_f32"} : (tensor<4x!quant.uniform<i8:f32, 0.1>>) -> tensor<4xf32>
    %3 = "tpu.Cast"(%2) {name = "a_i8"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
    %4 = "tpu.Cast"(%1) {name = "b_f32"} : (tensor<4x!quant.uniform<i8:f32, 0.1>>) -> tensor<4xf32>
    %5 = "tpu.Cast"(%4) {name = "b_i8"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.05>>
    %6 = "tpu.Cast"(%0) {name = "x_f16"} : (tensor<4xf32>) -> tensor<4xf16>
    %7 = "tpu.Cast"(%6) {name = "c_f32"} : (tensor<4xf16>) -> tensor<4xf32>
    %8 = "tpu.Cast"(%7) {name = "c_f16"} : (tensor<4xf32>) -> tensor<4xf16>
    %9 = "tpu.Cast"(%8) {name = "c_same"} : (tensor<4xf16>) -> tensor<4xf16>
    %10 = "tpu.Concat"(%3, %5, %9) {name = "cat", axis = 0 : i64} : (tensor<4x!quant.uniform<i8:f32, 0.1>>, tensor<4x!quant.uniform<i8:f32, 0.05>>, tensor<4xf16>) -> tensor<12xf32>
    func.return %10 : tensor<12xf32>
  }
}

// -----

// cv18xx rescales with its 8-bit multiplier; two RequantInts in a row become
// one when the middle range holds the output's (the outer name survives).
// CHECK-LABEL: func.func @cv18xx_merge
// CHECK:         %[[Q:.*]] = "tpu.Cast"
// CHECK-NEXT:    %[[R:.*]] = "tpu.RequantInt"(%[[Q]]) {name = "b", multiplier = [64 : i64], rshift = [5 : i64], round_mode = "HalfAwayFromZero"}
// CHECK-NEXT:    "tpu.Cast"(%[[R]]) {name = "y"}
builtin.module attributes {module.chip = "cv183x"} {
  func.func @cv18xx_merge(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "tpu.Cast"(%0) {name = "x_i8"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
    %2 = "tpu.RequantInt"(%1) {name = "a", multiplier = [1], rshift = [0]} : (tensor<4x!quant.uniform<i8:f32, 0.1>>) -> tensor<4x!quant.uniform<i8:f32, 0.08>>
    %3 = "tpu.RequantInt"(%2) {name = "b", multiplier = [1], rshift = [0]} : (tensor<4x!quant.uniform<i8:f32, 0.08>>) -> tensor<4x!quant.uniform<i8:f32, 0.05>>
    %4 = "tpu.Cast"(%3) {name = "y"} : (tensor<4x!quant.uniform<i8:f32, 0.05>>) -> tensor<4xf32>
    func.return %4 : tensor<4xf32>
  }
}

// -----

// Kept: f32 -> f16 -> f32 rounds; a value conversion (`to`); a middle value
// read elsewhere; RequantInts whose middle range clips the output's.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-6: "tpu.Cast"
// CHECK-COUNT-2: "tpu.RequantInt"
// CHECK:         "tpu.Cast"(%{{.*}}) {name = "out"}
builtin.module {
  func.func @kept(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "tpu.Cast"(%0) {name = "x_f16"} : (tensor<4xf32>) -> tensor<4xf16>
    %2 = "tpu.Cast"(%1) {name = "round"} : (tensor<4xf16>) -> tensor<4xf32>
    %3 = "tpu.Cast"(%0) {name = "int", to = "INT32"} : (tensor<4xf32>) -> tensor<4xf32>
    %4 = "tpu.Cast"(%0) {name = "x_i8"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
    %5 = "tpu.Cast"(%4) {name = "deq"} : (tensor<4x!quant.uniform<i8:f32, 0.1>>) -> tensor<4xf32>
    %6 = "tpu.Cast"(%5) {name = "req"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.2>>
    %7 = "tpu.RequantInt"(%6) {name = "narrow", multiplier = [1], rshift = [0]} : (tensor<4x!quant.uniform<i8:f32, 0.2>>) -> tensor<4x!quant.uniform<i8:f32, 0.01>>
    %8 = "tpu.RequantInt"(%7) {name = "wide", multiplier = [1], rshift = [0]} : (tensor<4x!quant.uniform<i8:f32, 0.01>>) -> tensor<4x!quant.uniform<i8:f32, 0.1>>
    %9 = "tpu.Cast"(%8) {name = "out"} : (tensor<4x!quant.uniform<i8:f32, 0.1>>) -> tensor<4xf32>
    func.return %2, %3, %5, %9 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A returned Cast to the type it reads is removed and its producer takes
// the returned name.
// CHECK-LABEL: func.func @returned
// CHECK:         %[[S:.*]] = "tpu.Sigmoid"(%{{.*}}) {name = "y"}
// CHECK-NEXT:    func.return %[[S]]
builtin.module {
  func.func @returned(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "tpu.Sigmoid"(%0) {name = "s"} : (tensor<4xf32>) -> tensor<4xf32>
    %2 = "tpu.Cast"(%1) {name = "y"} : (tensor<4xf32>) -> tensor<4xf32>
    func.return %2 : tensor<4xf32>
  }
}
