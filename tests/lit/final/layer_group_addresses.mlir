// address-assign after layer-group: a, b and c are inside the tpu.Group
// (local memory): no address; the group's result (c stored) has one. x (the group's input) and c (its
// output) live in DDR over the whole group, so they do not share memory
// (the loop loads x slices while it stores c slices): neuron_size 2 x 256 KiB
// instead of 3 x 256 KiB with every op global.
// RUN: tpuc-opt %s -p 'layer-group,address-assign' | filecheck %s
// RUN: tpuc-opt %s -p 'layer-group{disable=true},address-assign' | filecheck %s --check-prefix=GLOBAL
// RUN: sed 's/TPU_DIVIDED/TPU_LOWERED/' %s | tpuc-opt -p finalize | filecheck %s --check-prefix=STAGE

// CHECK:      module.neuron_size = 524288 : i64
// CHECK:      "top.Input"{{.*}} -> tensor<1x64x32x32xf32, 4294967296 : i64>
// CHECK-NEXT: "tpu.Group"
// CHECK-NEXT: "tpu.Load"{{.*}} -> tensor<1x64x32x32xf32>
// CHECK-NEXT: "tpu.Relu"{{.*}} -> tensor<1x64x32x32xf32>
// CHECK-NEXT: "tpu.Sigmoid"{{.*}} -> tensor<1x64x32x32xf32>
// CHECK-NEXT: "tpu.Add"{{.*}} -> tensor<1x64x32x32xf32>
// CHECK-NEXT: "tpu.Store"
// CHECK-NEXT: "tpu.Yield"
// CHECK-NEXT: }) {{.*}} -> tensor<1x64x32x32xf32, 4295229440 : i64>

// GLOBAL:     module.neuron_size = 786432 : i64
// GLOBAL:     "tpu.Relu"{{.*}} -> tensor<1x64x32x32xf32, {{[0-9]+}} : i64>

// the finalize stage runs layer-group before address-assign
// STAGE:      module.neuron_size = 524288 : i64
// STAGE:      "tpu.Group"

builtin.module attributes {module.chip = "bm1684x", module.state = "TPU_DIVIDED"} {
  func.func @main(%arg0: tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32>
    %a = "tpu.Relu"(%x) {name = "a"} : (tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32>
    %b = "tpu.Sigmoid"(%a) {name = "b"} : (tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32>
    %c = "tpu.Add"(%a, %b) {name = "c"} : (tensor<1x64x32x32xf32>, tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32>
    func.return %c : tensor<1x64x32x32xf32>
  }
}
