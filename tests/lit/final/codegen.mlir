// codegen through tpuc-opt: the finalize stage then the codegen pass write
// the bmodel and its tensor_location.json, and leave the module as address-assign
// left it. The bmodel then runs in the device simulator: r = relu(2·x).
// Every op global here (disable_layer_group); with the default layer groups,
// Mul and Relu form one group: its input x and its weight are loaded, m stays
// in local memory and a is stored (GROUP).
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: tpuc-opt %s -p 'finalize{disable_layer_group=true},codegen{output="m.bmodel" locations="m_tensor_location.json"}' | filecheck %s --check-prefix=IR
// RUN: filecheck %s --check-prefix=LOC < m_tensor_location.json
// RUN: %python -c "from tpuc.target.bmodel import load_bmodel_file; b = load_bmodel_file('m.bmodel'); p = b.nets[0].parameters[0]; print(b.chip, b.nets[0].name, [t.name for t in p.inputs], [t.name for t in p.outputs], len(p.coeff), [(g.bdc_num, g.gdma_num) for g in p.cmd_groups])" | filecheck %s --check-prefix=BMODEL
// RUN: %python -c "import numpy as np; from tpuc.target.runtime import load_bmodel; out = load_bmodel('m.bmodel').run({'x': np.arange(-8, 8, dtype=np.float32).reshape(1, 16)}); print(out['r'].ravel().tolist())" | filecheck %s --check-prefix=SIM
// RUN: not tpuc-opt %s -p codegen 2>&1 | filecheck %s --check-prefix=STATE
// RUN: tpuc-opt %s -p 'finalize,codegen{output="g.bmodel"}' | filecheck %s --check-prefix=GROUP
// RUN: %python -c "from tpuc.target.bmodel import load_bmodel_file; p = load_bmodel_file('g.bmodel').nets[0].parameters[0]; print([(g.bdc_num, g.gdma_num) for g in p.cmd_groups])" | filecheck %s --check-prefix=GROUP-CMDS
// RUN: %python -c "import numpy as np; from tpuc.target.runtime import load_bmodel; out = load_bmodel('g.bmodel').run({'x': np.arange(-8, 8, dtype=np.float32).reshape(1, 16)}); print(out['r'].ravel().tolist())" | filecheck %s --check-prefix=SIM

// IR:      module.state = "TPU_ADDRESSED"
// IR:      "tpu.Mul"{{.*}}name = "m"{{.*}}subnet_id = 0 : i64
// IR-NEXT: "tpu.Relu"{{.*}}name = "a"
// IR-NEXT: "tpu.Reshape"{{.*}}name = "r"

// LOC:      "bmodel": "m.bmodel",
// LOC-NEXT: "chip": "BM1684X",
// LOC-NEXT: "net": "tiny",
// LOC:      "name": "x",
// LOC-NEXT: "op": "top.Input",
// LOC-NEXT: "address": 4294971392,
// LOC:      "name": "m",
// LOC-NEXT: "op": "tpu.Mul",
// LOC-NEXT: "address": 4294971456,
// LOC:      "subnet": 0

// The coefficient region (16 f32 weights) is rounded to 4 KiB; Mul and Relu are
// one TIU command each, the in-place Reshape none.
// BMODEL: BM1684X tiny ['x'] ['r'] 4096 [(2, 0)]

// SIM: [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]

// GROUP:      module.layer_groups = [{id = 0 : i64, ops = ["m", "a"]
// GROUP:      "tpu.Mul"{{.*}}name = "m"{{.*}} -> tensor<1x16xf32>
// GROUP-NEXT: "tpu.Relu"{{.*}}name = "a"{{.*}} -> tensor<1x16xf32, {{[0-9]+}} : i64>
// two TIU commands on local records; GDMA: load x, load w, store a
// GROUP-CMDS: [(2, 3)]

// STATE: error: codegen: module is in state TPU_LOWERED, needs TPU_ADDRESSED; run address-assign first

builtin.module attributes {module.state = "TPU_LOWERED", module.chip = "bm1684x", module.name = "tiny"} {
  func.func @main(%arg0: tensor<1x16xf32>) -> tensor<1x4x4xf32> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %w = "top.Weight"() {name = "w", value = dense<2.0> : tensor<1x16xf32>} : () -> tensor<1x16xf32>
    %v0 = "tpu.Mul"(%x, %w) {name = "m"} : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %a = "tpu.Relu"(%v0) {name = "a"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %r = "tpu.Reshape"(%a) {name = "r", shape = [1, 4, 4]} : (tensor<1x16xf32>) -> tensor<1x4x4xf32>
    func.return %r : tensor<1x4x4xf32>
  }
}
