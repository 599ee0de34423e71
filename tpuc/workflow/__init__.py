"""The library functions the tools are thin command lines over.

`pipeline` runs pass sequences, `deploy` is model_deploy.py's work,
`mixed_precision` and `auto_mix` choose per-layer modes, and `calibration`
is run_calibration.py's package. Upper modules may use lower ones in the
order of the `workflow` contract in pyproject.toml, never the reverse.
"""
