// RUN: not tpuc-opt %s 2>&1 | filecheck %s

// A zero point outside the storage range is reported with its line.
// CHECK: error: {{.*}}invalid.mlir: invalid IR: line [[# @LINE + 3]]:{{[0-9]+}}: illegal zero point 300: outside the storage range [0, 255]
// CHECK-NOT: Traceback
module {
  func.func @main(%arg0: tensor<4x!quant.uniform<u8:f32, 0.5:300>>) {
    func.return
  }
}
