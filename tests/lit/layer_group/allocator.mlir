// Local-memory allocation of the sliced group of slicing.mlir (cv183x: 32 KiB
// per lane, 8 banks of 4 KiB; bf16, 32 channels = one plane per lane).
// Sizes are the largest slice rounded up to the 16-byte EU row: x 51 rows x
// 96 x 2 B = 9792, c1 50 rows = 9600. Buffers alive in a common timestep
// never overlap; a TIU op's operands and result sit in different banks where
// possible: c1 reads x in banks 0-2 and writes banks 3-5; c2 reads r (banks
// 0-2) and writes bank 3; the held weights share bank 6; the concat result
// (bank 7) is written while GDMA loads the next slice of x into banks 0-2.
// r reuses x's bytes: x (loaded in the last timestep for the next slice) is
// dead from c1's end until then.
// (s's scratch buffer is at 0: `buffer_addr` is left out at its default.)
// (f32 convs: float_slices=true lets them slice; deploy keeps float GEMM convs whole.)
// RUN: tpuc-opt %s -p 'layer-group{float_slices=true}' | filecheck %s

// CHECK:      "tpu.Load"(%w2) {ts = 1 : i64, stage = 1 : i64, addr = 25152 : i64, size = 576 : i64, held}
// CHECK-NEXT: "tpu.Load"(%x) {ts = 5 : i64, stage = 0 : i64, addr = 0 : i64, size = 9792 : i64,
// CHECK-NEXT: "tpu.Load"(%w1) {ts = 5 : i64, stage = 0 : i64, addr = 24576 : i64, size = 576 : i64, held}
// CHECK-NEXT: name = "c1", {{.*}}lg = #tpu.local<ts = 0, stage = 1, addr = 12288, size = 9600,
// CHECK-NEXT: name = "r", {{.*}}lg = #tpu.local<ts = 1, stage = 1, addr = 0, size = 9600,
// CHECK-NEXT: name = "c2", {{.*}}lg = #tpu.local<ts = 2, stage = 1, addr = 12288, size = 2304,
// CHECK-NEXT: name = "p", {{.*}}lg = #tpu.local<ts = 3, stage = 1, addr = 16384, size = 576,
// CHECK-NEXT: name = "s", {{.*}}lg = #tpu.local<ts = 4, stage = 1, addr = 12288, size = 576, buffer_size = 1152,
// CHECK-NEXT: name = "cat", {{.*}}lg = #tpu.local<ts = 5, stage = 1, addr = 28672, size = 1152,
// CHECK-NEXT: "tpu.Store"({{.*}}) {ts = 0 : i64, stage = 2 : i64,

builtin.module attributes {module.chip = "cv183x", module.state = "TPU_LOWERED"} {
  func.func @main(%arg0: tensor<1x32x96x96xbf16>) -> tensor<1x64x24x24xbf16> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16>
    %w1 = "top.Weight"() {name = "w1"} : () -> tensor<32x32x3x3xbf16>
    %w2 = "top.Weight"() {name = "w2"} : () -> tensor<32x32x3x3xbf16>
    %none = "top.None"() : () -> none
    %c1 = "tpu.Conv2D"(%x, %w1, %none) {name = "c1", kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64} : (tensor<1x32x96x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x96x96xbf16>
    %r = "tpu.Relu"(%c1) {name = "r"} : (tensor<1x32x96x96xbf16>) -> tensor<1x32x96x96xbf16>
    %c2 = "tpu.Conv2D"(%r, %w2, %none) {name = "c2", kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [2 : i64, 2 : i64, 2 : i64, 2 : i64], dilations = [2 : i64, 2 : i64], group = 1 : i64} : (tensor<1x32x96x96xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x48x48xbf16>
    %p = "tpu.Pool2D"(%c2) {name = "p", kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], pads = [0 : i64, 0 : i64, 0 : i64, 0 : i64], ceil_mode = false, pool_mode = "Max"} : (tensor<1x32x48x48xbf16>) -> tensor<1x32x24x24xbf16>
    %s = "tpu.Sigmoid"(%p) {name = "s"} : (tensor<1x32x24x24xbf16>) -> tensor<1x32x24x24xbf16>
    %cat = "tpu.Concat"(%p, %s) {name = "cat", axis = 1 : i64} : (tensor<1x32x24x24xbf16>, tensor<1x32x24x24xbf16>) -> tensor<1x64x24x24xbf16>
    func.return %cat : tensor<1x64x24x24xbf16>
  }
}
