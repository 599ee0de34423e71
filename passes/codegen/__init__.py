"""codegen: a TPU_ADDRESSED module -> tpuc instruction streams -> a bmodel."""
