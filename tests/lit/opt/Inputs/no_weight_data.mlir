// Not a test (lit.local.cfg excludes Inputs/): a BatchNorm whose weights have no data.
module attributes {module.weight_file = "does_not_exist.npz"} {
  func.func @main(%arg0: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    %m = "top.Weight"() {name = "mean"} : () -> tensor<2xf32>
    %v = "top.Weight"() {name = "var"} : () -> tensor<2xf32>
    %n = "top.None"() : () -> none
    %1 = "top.BatchNorm"(%0, %m, %v, %n, %n) {name = "bn"} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, none, none) -> tensor<1x2x2x2xf32>
    func.return %1 : tensor<1x2x2x2xf32>
  }
}
