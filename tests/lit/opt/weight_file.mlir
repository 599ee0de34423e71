// Weights from the module's npz: folds read them and --weight-output writes
// the live ones (old Conv/BatchNorm weights dropped, folded ones added).
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: %python -c "import numpy as np; np.savez('w.npz', w=np.ones((2,1,1,1), np.float32), mean=np.array([1, 2], np.float32), var=np.array([4, 16], np.float32))"
// RUN: tpuc-opt %s -p canonicalize --weight-output out_weight.npz -o out.mlir
// RUN: filecheck %s --check-prefix=IR < out.mlir
// RUN: %python -c "import numpy as np; d = np.load('out_weight.npz'); print(sorted((k, d[k].ravel().tolist()) for k in d.files))" | filecheck %s --check-prefix=NPZ
// Without --weight-output the new weights are reported as unsaved.
// RUN: tpuc-opt %s -p canonicalize 2>&1 >/dev/null | filecheck %s --check-prefix=WARN
// An input file is never overwritten.
// RUN: not tpuc-opt %s -p canonicalize --weight-output w.npz 2>&1 | filecheck %s --check-prefix=PROTECT

// IR: module.weight_file = "out_weight.npz"
// IR: "top.Weight"() {name = "bn_filter"} : () -> tensor<2x1x1x1xf32>
// IR: "top.Weight"() {name = "bn_bias"} : () -> tensor<2xf32>
// IR: "top.Conv"{{.*}}name = "bn"
// NPZ: [('bn_bias', [-0.5, -0.5]), ('bn_filter', [0.5, 0.25])]
// WARN: warning: 2 new weight(s) are not saved; pass --weight-output to write them
// PROTECT: error: w.npz: refusing to overwrite an input file

module attributes {module.weight_file = "w.npz"} {
  func.func @main(%arg0: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    %w = "top.Weight"() {name = "w"} : () -> tensor<2x1x1x1xf32>
    %n = "top.None"() : () -> none
    %1 = "top.Conv"(%0, %w, %n) {name = "conv", kernel_shape = [1, 1], group = 2 : i64} : (tensor<1x2x2x2xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x2x2xf32>
    %m = "top.Weight"() {name = "mean"} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var"} : () -> tensor<2xf32>
    %2 = "top.BatchNorm"(%1, %m, %v, %n, %n) {name = "bn", epsilon = 0.0} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, none, none) -> tensor<1x2x2x2xf32>
    func.return %2 : tensor<1x2x2x2xf32>
  }
}
