"""INT8 calibration: activation statistics, threshold methods, auto-tune and
TPU-MLIR's calibration table (run_calibration.py and model_deploy read it)."""
