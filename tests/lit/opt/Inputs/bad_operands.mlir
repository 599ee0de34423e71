// Not a test: a Relu without its operand fails verification.
module {
  %0 = "top.Relu"() {name = "r"} : () -> tensor<2xf32>
}
