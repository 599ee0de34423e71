"""INT8 calibration: activation statistics, threshold methods and auto-tune,
written as TPU-MLIR's calibration table (the format is `tpuc.base.cali_table`,
which the import-calibration-table pass reads too)."""
