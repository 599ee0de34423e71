// import-calibration-table gives every computed tensor its calibrated range:
// [-threshold, threshold] when symmetric ([0, threshold] for tensors with no
// negative values, as TPU-MLIR), [min, max] clipped to ±threshold and widened
// to hold 0 when
// asymmetric; weights keep f32 and the module moves to TOP_CALIBRATED.
// RUN: tpuc-opt %s -p 'import-calibration-table{file="%S/Inputs/small_cali_table"}' | filecheck %s --check-prefix=SYM
// RUN: tpuc-opt %s -p 'import-calibration-table{file="%S/Inputs/small_cali_table" asymmetric=true}' | filecheck %s --check-prefix=ASYM
// RUN: not tpuc-opt %s -p 'import-calibration-table{file="%S/Inputs/other_cali_table"}' 2>&1 | filecheck %s --check-prefix=OTHER
// RUN: not tpuc-opt %s -p 'import-calibration-table{file="%S/Inputs/missing"}' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: tpuc-opt %s -p 'import-calibration-table{file="%S/Inputs/small_cali_table"}' | not tpuc-opt -p 'import-calibration-table{file="%S/Inputs/small_cali_table"}' 2>&1 | filecheck %s --check-prefix=TWICE

// SYM:      module.state = "TOP_CALIBRATED"
// SYM:      func.func @main(%{{.*}}: tensor<1x2xf32>) -> tensor<1x2x!quant.calibrated<f32<0.0:1.0>>>
// SYM:        "top.Input"{{.*}} -> tensor<1x2x!quant.calibrated<f32<-2.0:2.0>>>
// SYM:        "top.Weight"() {name = "w"{{.*}} : () -> tensor<2x2xf32>
// SYM:        "top.MatMul"{{.*}} -> tensor<1x2x!quant.calibrated<f32<0.0:4.0>>>
// SYM:        "top.Sigmoid"{{.*}} -> tensor<1x2x!quant.calibrated<f32<0.0:1.0>>>
// ASYM:       "top.Input"{{.*}} -> tensor<1x2x!quant.calibrated<f32<-1.5:2.0>>>
// ASYM:       "top.MatMul"{{.*}} -> tensor<1x2x!quant.calibrated<f32<0.0:4.0>>>
// ASYM:       "top.Sigmoid"{{.*}} -> tensor<1x2x!quant.calibrated<f32<0.0:1.0>>>
// OTHER:      error: {{.*}}other_cali_table: no entry for 2 tensor(s) of the module (c, y); is the table from another model?
// MISSING:    error: {{.*}}missing
// TWICE:      error: import-calibration-table: module is in state TOP_CALIBRATED, needs TOP_F32
// OTHER-NOT:  Traceback

builtin.module attributes {module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x2xf32>) -> tensor<1x2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2xf32>) -> tensor<1x2xf32>
    %1 = "top.Weight"() {name = "w", value = dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.MatMul"(%0, %1, %2) {name = "c", do_relu = true} : (tensor<1x2xf32>, tensor<2x2xf32>, none) -> tensor<1x2xf32>
    %4 = "top.Sigmoid"(%3) {name = "y"} : (tensor<1x2xf32>) -> tensor<1x2xf32>
    func.return %4 : tensor<1x2xf32>
  }
}
