// tpuc-opt lists tpuc's passes and reads/prints the TOP dialect unchanged
// without a pipeline; xDSL's cse/dce are available too.
// RUN: env COLUMNS=1000 tpuc-opt --help | filecheck %s --check-prefix=HELP
// RUN: tpuc-opt %s | filecheck %s
// RUN: tpuc-opt %s -p cse,dce | filecheck %s --check-prefix=DCE

// HELP: Available passes are: {{.*}}canonicalize{{.*}}cse,dce

// CHECK: "top.Weight"() {name = "unused"
// CHECK: "top.Sigmoid"(%{{.*}}) {name = "s"}
// DCE-NOT: "unused"

module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "top.Weight"() {name = "unused", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
    %2 = "top.Sigmoid"(%0) {name = "s"} : (tensor<2xf32>) -> tensor<2xf32>
    func.return %2 : tensor<2xf32>
  }
}
