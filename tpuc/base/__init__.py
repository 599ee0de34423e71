"""The bottom layer: what every other layer may use and that knows no IR.

Errors, numeric helpers, element dtypes, registries, file and flag handling,
the calibration-table and module-state file formats, output comparison and
pooling geometry. Inside, `errors` is lowest, then `numerics`/`registry`,
then `dtypes`, then the rest (see the `base` contract in pyproject.toml).
"""
