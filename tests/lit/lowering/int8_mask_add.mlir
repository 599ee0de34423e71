// An attention mask added to scores in an INT8 model. transformers' eager
// export: mask = Where(keep, 0, -3.4e38), scores + mask, Softmax. No INT8
// scale holds -3.4e38 next to scores of magnitude ~1.3 (the scores would
// round to 0 and every softmax row come out uniform), so the mask-add keeps
// the float fallback (F32 on bm1684x) and reads the mask exactly; the
// scores are cast from INT8 on their own scale. A -10000-style mask
// (range 10000 against 1.3) is held the same way; a residual Add whose
// operands are of one size stays INT8.
// RUN: tpuc-opt %s -p 'processor-assign{chip="bm1684x" mode="INT8"},convert-top-to-tpu' | filecheck %s

// CHECK:      "tpu.Add"({{.*}}) {name = "scores", multiplier
// CHECK:      %[[S:.*]] = "tpu.Cast"(%{{.*}}) {name = "scores_f32"} : (tensor<1x2x4x!quant.uniform<i8:f32, 0.010236220472440945>>) -> tensor<1x2x4xf32>
// CHECK:      %[[M:.*]] = "tpu.Where"({{.*}}) {name = "mask"{{.*}} -> tensor<1x1x4xf32>
// CHECK-NEXT: %[[ADD:.*]] = "tpu.Add"(%[[S]], %[[M]]) {name = "masked"{{.*}} -> tensor<1x2x4xf32>
// CHECK-NEXT: "tpu.Softmax"(%[[ADD]]) {name = "probs"{{.*}} -> tensor<1x2x4xf32>
// CHECK:      "tpu.Add"(%[[S]], %{{.*}}) {name = "masked_10000"{{.*}} -> tensor<1x2x4xf32>
// CHECK:      "tpu.Add"({{.*}}) {name = "residual_i8", multiplier = {{.*}} -> tensor<1x2x4x!quant.uniform<i8:f32,

builtin.module attributes {module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x4xf32>, %arg1: tensor<1x1x4xf32>, %arg2: tensor<1x2x4xf32>) -> (tensor<1x2x4x!quant.calibrated<f32<0.0:1.0>>>, tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>, tensor<1x2x4x!quant.calibrated<f32<-2.6:2.6>>>) {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x4xf32>) -> tensor<1x2x4x!quant.calibrated<f32<-0.65:0.65>>>
    %scores = "top.Add"(%x, %x) {name = "scores"} : (tensor<1x2x4x!quant.calibrated<f32<-0.65:0.65>>>, tensor<1x2x4x!quant.calibrated<f32<-0.65:0.65>>>) -> tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>
    %keep = "top.Input"(%arg1) {name = "keep"} : (tensor<1x1x4xf32>) -> tensor<1x1x4x!quant.calibrated<f32<0.0:1.0>>>
    %zero = "top.Weight"() {name = "zero", value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %low = "top.Weight"() {name = "low", value = dense<-3.40282347e+38> : tensor<f32>} : () -> tensor<f32>
    %mask = "top.Where"(%keep, %zero, %low) {name = "mask"} : (tensor<1x1x4x!quant.calibrated<f32<0.0:1.0>>>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x!quant.calibrated<f32<-3.40282347e+38:3.40282347e+38>>>
    %masked = "top.Add"(%scores, %mask) {name = "masked"} : (tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>, tensor<1x1x4x!quant.calibrated<f32<-3.40282347e+38:3.40282347e+38>>>) -> tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>
    %probs = "top.Softmax"(%masked) {name = "probs", axis = 2} : (tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>) -> tensor<1x2x4x!quant.calibrated<f32<0.0:1.0>>>
    %neg = "top.Weight"() {name = "neg", value = dense<[[[0.0, 0.0, -10000.0, -10000.0]]]> : tensor<1x1x4xf32>} : () -> tensor<1x1x4xf32>
    %masked_10000 = "top.Add"(%scores, %neg) {name = "masked_10000"} : (tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>, tensor<1x1x4xf32>) -> tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>
    %y = "top.Input"(%arg2) {name = "y"} : (tensor<1x2x4xf32>) -> tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>
    %residual = "top.Add"(%scores, %y) {name = "residual"} : (tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>, tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>) -> tensor<1x2x4x!quant.calibrated<f32<-2.6:2.6>>>
    func.return %probs, %masked_10000, %residual : tensor<1x2x4x!quant.calibrated<f32<0.0:1.0>>>, tensor<1x2x4x!quant.calibrated<f32<-1.3:1.3>>>, tensor<1x2x4x!quant.calibrated<f32<-2.6:2.6>>>
  }
}
