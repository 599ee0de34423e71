// address-assign: weights first (from chip.gmem_start, each gmem_align-aligned,
// region rounded to 4 KiB), then activations packed by liveness from the next
// 4 KiB boundary. The book's Fig. 5-27: V0 (read by op2 and op4) is dead after
// op4, but op4's result c may not take V0's memory (an op never writes over its
// own input); op5's result V1 does reuse it. Reshape is in place (r == V1).
// RUN: tpuc-opt %s -p 'address-assign{chip="bm1684x"}' | filecheck %s --check-prefix=BM
// RUN: tpuc-opt %s -p 'address-assign{chip="cv183x"}' | filecheck %s --check-prefix=CV
// RUN: not tpuc-opt %s -p 'address-assign{chip="bm1684x"},address-assign{chip="bm1684x"}' 2>&1 | filecheck %s --check-prefix=TWICE

// 0x100000000 = 4294967296 (coefficients), 4294971392 = + 4096 (neurons).
// BM:      module.coeff_addr = 4294967296 : i64, module.coeff_size = 4096 : i64, module.neuron_addr = 4294971392 : i64, module.neuron_size = 192 : i64
// BM:      func.func @main(%{{.*}}: tensor<1x16xf32>) -> tensor<1x4x4xf32, 4294971456 : i64>
// BM-NEXT: "top.Input"{{.*}} -> tensor<1x16xf32, 4294971392 : i64>
// BM-NEXT: "top.Weight"{{.*}} -> tensor<1x16xf32, 4294967296 : i64>
// BM-NEXT: "tpu.Mul"{{.*}}name = "V0"{{.*}} -> tensor<1x16xf32, 4294971456 : i64>
// BM-NEXT: "tpu.Relu"{{.*}}name = "a"{{.*}} -> tensor<1x16xf32, 4294971392 : i64>
// BM-NEXT: "tpu.Relu"{{.*}}name = "b"{{.*}} -> tensor<1x16xf32, 4294971520 : i64>
// BM-NEXT: "tpu.Add"{{.*}}name = "c"{{.*}} -> tensor<1x16xf32, 4294971392 : i64>
// BM-NEXT: "tpu.Relu"{{.*}}name = "V1"{{.*}} -> tensor<1x16xf32, 4294971456 : i64>
// BM-NEXT: "tpu.Reshape"{{.*}}name = "r"{{.*}} -> tensor<1x4x4xf32, 4294971456 : i64>
// BM-NEXT: func.return %{{.*}} : tensor<1x4x4xf32, 4294971456 : i64>

// cv183x: addresses from 0, 16-byte alignment.
// CV:      module.coeff_addr = 0 : i64, module.coeff_size = 4096 : i64, module.neuron_addr = 4096 : i64, module.neuron_size = 192 : i64
// CV:      "top.Weight"{{.*}} -> tensor<1x16xf32, 0 : i64>
// CV:      name = "V1"{{.*}} -> tensor<1x16xf32, 4160 : i64>

// TWICE: error: address-assign: module is in state TPU_ADDRESSED, needs TPU_DIVIDED; it has already gone past this step

builtin.module {
  func.func @main(%arg0: tensor<1x16xf32>) -> tensor<1x4x4xf32> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %w = "top.Weight"() {name = "w"} : () -> tensor<1x16xf32>
    %v0 = "tpu.Mul"(%x, %w) {name = "V0"} : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %a = "tpu.Relu"(%v0) {name = "a"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %b = "tpu.Relu"(%a) {name = "b"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %c = "tpu.Add"(%v0, %b) {name = "c"} : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %v1 = "tpu.Relu"(%c) {name = "V1"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %r = "tpu.Reshape"(%v1) {name = "r", shape = [1, 4, 4]} : (tensor<1x16xf32>) -> tensor<1x4x4xf32>
    func.return %r : tensor<1x4x4xf32>
  }
}
