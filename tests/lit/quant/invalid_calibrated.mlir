// RUN: not tpuc-opt %s 2>&1 | filecheck %s

// CHECK: error: {{.*}}: invalid IR: line {{[0-9]+}}:{{[0-9]+}}: illegal min and max: (2.0:-1.0)
module {
  func.func @main(%arg0: tensor<4x!quant.calibrated<f32<2.0:-1.0>>>) {
    func.return
  }
}
