// Bad input ends with one `error:` line and exit status 1, never a traceback.
// RUN: not tpuc-opt %s 2>&1 | filecheck %s --check-prefix=SYNTAX
// RUN: not tpuc-opt %s.missing 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not tpuc-opt %S/Inputs/no_weight_data.mlir -p canonicalize 2>&1 | filecheck %s --check-prefix=NODATA
// RUN: not tpuc-opt %S/Inputs/no_weight_data.mlir -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not tpuc-opt %S/Inputs/bad_operands.mlir 2>&1 | filecheck %s --check-prefix=VERIFY

// SYNTAX: error: {{.*}}errors.mlir: invalid IR: line {{[0-9]+}}:{{[0-9]+}}: {{.+}}
// SYNTAX-NOT: Traceback
// MISSING: error: {{.*}}errors.mlir.missing: no such file
// NODATA: error: weight 'mean' has no data (inline value or weight file)
// NODATA-NOT: Traceback
// PASS: error: Unrecognized passes: ['no-such-pass']
// VERIFY: error: {{.*}}bad_operands.mlir: Expected 1 operand, but got 0

module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2xf32>) -> 
  }
}
