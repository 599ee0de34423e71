// strip-io-quant (model_deploy.py --quant_input/--quant_output): the Casts at the
// network's edges go; an input's Cast only when it is the Input's one user, an
// output's when only the return reads it; quantized and f16/bf16 casts alike;
// the lists pick inputs / outputs by 1-based index; the module stays TPU_LOWERED.
// RUN: tpuc-opt %s -p 'strip-io-quant{quant_input=true quant_output=true}' | filecheck %s
// RUN: tpuc-opt %s -p 'strip-io-quant{quant_input=true quant_input_list="3"}' | filecheck %s --check-prefix=LIST
// RUN: tpuc-opt %s -p 'strip-io-quant' | filecheck %s --check-prefix=NONE
// RUN: not tpuc-opt %s -p 'strip-io-quant{quant_output=true quant_output_list="1,4"}' 2>&1 | filecheck %s --check-prefix=RANGE
// RUN: not tpuc-opt %s -p 'strip-io-quant{quant_input=true quant_input_list="0"}' 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: tpuc-opt %s -p 'strip-io-quant{quant_input=true quant_output=true},weight-reorder' | filecheck %s --check-prefix=NEXT

// CHECK:      module.state = "TPU_LOWERED"
// CHECK:      func.func @main(%{{.*}}: tensor<1x4x!quant.uniform<i8:f32, 0.1>>, %{{.*}}: tensor<1x4xf32>, %{{.*}}: tensor<1x4xf16>) -> (tensor<1x4x!quant.uniform<i8:f32, 0.2>>, tensor<1x4xf32>, tensor<1x4xf16>)
// CHECK-NEXT:   %[[A:.*]] = "top.Input"(%{{.*}}) {name = "a"} : (tensor<1x4x!quant.uniform<i8:f32, 0.1>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.1>>
// CHECK-NEXT:   %[[B:.*]] = "top.Input"(%{{.*}}) {name = "b"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:   %[[B8:.*]] = "tpu.Cast"(%[[B]]) {name = "b_i8"}
// CHECK-NEXT:   %[[BR:.*]] = "tpu.Relu"(%[[B]])
// CHECK-NEXT:   %[[C:.*]] = "top.Input"(%{{.*}}) {name = "c"} : (tensor<1x4xf16>) -> tensor<1x4xf16>
// CHECK-NEXT:   %[[Y:.*]] = "tpu.Add"(%[[A]], %[[B8]]) {name = "y_i8"}
// CHECK-NEXT:   %[[Z:.*]] = "tpu.Relu"(%[[C]]) {name = "z_f16"}
// CHECK-NEXT:   func.return %[[Y]], %[[BR]], %[[Z]]

// LIST:      func.func @main(%{{.*}}: tensor<1x4xf32>, %{{.*}}: tensor<1x4xf32>, %{{.*}}: tensor<1x4xf16>) -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
// LIST:      "tpu.Cast"{{.*}}name = "a_i8"
// LIST-NOT:  name = "c_f16"
// LIST:      "tpu.Cast"{{.*}}name = "y"

// NONE:      func.func @main(%{{.*}}: tensor<1x4xf32>, %{{.*}}: tensor<1x4xf32>, %{{.*}}: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
// RANGE: error: quant_output_list: 4 out of range; the network has 3 output(s), numbered from 1
// ZERO:  error: quant_input_list: '0' is not an index (1-based, e.g. 1,3)
// NEXT:  module.state = "TPU_REORDERED"

builtin.module attributes {module.state = "TPU_LOWERED", module.chip = "bm1684x", module.mode = "INT8"} {
  func.func @main(%arg0: tensor<1x4xf32>, %arg1: tensor<1x4xf32>, %arg2: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) {
    %0 = "top.Input"(%arg0) {name = "a"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "tpu.Cast"(%0) {name = "a_i8"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.uniform<i8:f32, 0.1>>
    %2 = "top.Input"(%arg1) {name = "b"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %3 = "tpu.Cast"(%2) {name = "b_i8"} : (tensor<1x4xf32>) -> tensor<1x4x!quant.uniform<i8:f32, 0.1>>
    %4 = "tpu.Relu"(%2) {name = "r"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %5 = "top.Input"(%arg2) {name = "c"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %6 = "tpu.Cast"(%5) {name = "c_f16"} : (tensor<1x4xf32>) -> tensor<1x4xf16>
    %7 = "tpu.Add"(%1, %3) {name = "y_i8"} : (tensor<1x4x!quant.uniform<i8:f32, 0.1>>, tensor<1x4x!quant.uniform<i8:f32, 0.1>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.2>>
    %8 = "tpu.Cast"(%7) {name = "y"} : (tensor<1x4x!quant.uniform<i8:f32, 0.2>>) -> tensor<1x4xf32>
    %9 = "tpu.Relu"(%6) {name = "z_f16"} : (tensor<1x4xf16>) -> tensor<1x4xf16>
    %10 = "tpu.Cast"(%9) {name = "z"} : (tensor<1x4xf16>) -> tensor<1x4xf32>
    func.return %8, %4, %10 : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>
  }
}
