"""Native layer groups: ops whose slices live in the chip's local memory,
written as the chip's own local commands by the vendor library.

`plan` holds the plain record of a group (its ops, each tensor's slices
and local-memory addresses, the timestep table with pipeline stages) and
builds one for a chain of ops; `ops` the per-op local rules (each op's
local parameters, `local_sec_info_t` per slice and scratch buffer);
`emit` turns a plan into the command stream (strided GDMA loads and
stores, local calls, timesteps bracketed for the sync ids, the
three-stage software pipeline) and prices it with the vendor's cycles.
"""
