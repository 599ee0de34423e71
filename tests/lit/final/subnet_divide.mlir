// subnet-divide: ops the chip cannot run (tpu.TopK) go to CPU subnets;
// consecutive ops with the same mode share a subnet; leaves have none.
// RUN: tpuc-opt %s -p subnet-divide | filecheck %s
// RUN: not tpuc-opt %s -p 'subnet-divide{chip="cv183x"}' 2>&1 | filecheck %s --check-prefix=CHIP
// RUN: not tpuc-opt %s -p subnet-divide,subnet-divide 2>&1 | filecheck %s --check-prefix=TWICE

// CHECK:      module.state = "TPU_DIVIDED"
// CHECK-SAME: module.subnet_modes = ["TPU", "CPU", "TPU"]
// CHECK:      "top.Input"(%{{.*}}) {name = "x"} :
// CHECK:      "tpu.Relu"{{.*}}subnet_id = 0 : i64
// CHECK-NEXT: "tpu.TopK"{{.*}}subnet_id = 1 : i64
// CHECK-NEXT: "top.Weight"() {name = "w"
// CHECK-NEXT: "top.None"() : () -> none
// CHECK-NEXT: "tpu.Conv2D"{{.*}}subnet_id = 2 : i64
// CHECK-NEXT: "tpu.Relu"{{.*}}subnet_id = 2 : i64
// CHECK-NEXT: func.return

// CHIP:  error: subnet-divide: chip=cv183x but the module is for bm1684x
// TWICE: error: subnet-divide: module is in state TPU_DIVIDED, needs TPU_REORDERED; it has already gone past this step

builtin.module attributes {module.state = "TPU_REORDERED", module.chip = "bm1684x"} {
  func.func @main(%arg0: tensor<1x4x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
    %1 = "tpu.Relu"(%0) {name = "r"} : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
    %2, %3 = "tpu.TopK"(%1) {name = "v", result_names = ["v", "i"], axis = 1, K = 2} : (tensor<1x4x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>)
    %w = "top.Weight"() {name = "w"} : () -> tensor<1x2x2x1xf32>
    %n = "top.None"() : () -> none
    %4 = "tpu.Conv2D"(%2, %w, %n) {name = "c", kernel_shape = [1, 1]} : (tensor<1x2x2x2xf32>, tensor<1x2x2x1xf32>, none) -> tensor<1x2x2x2xf32>
    %5 = "tpu.Relu"(%4) {name = "y"} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    func.return %5, %3 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
  }
}
