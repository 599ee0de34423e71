"""Recycled memory for kernel outputs.

Fresh large arrays are expensive here: numpy's allocator maps them from the
OS, every first touch of a page faults (costly in a VM), and freeing unmaps
them again. A network run allocates the same sizes each time, so the arena
keeps the buffers of dead intermediates and hands them out again.

A buffer is *lent* when a kernel gets it from `empty`/`output`; it returns to
the free list once nothing but the arena references it (checked with the
reference count, so a view held anywhere keeps it alive). `output` may also
give a kernel one of its own operands to overwrite: an operand that dies at
this op, is a lent buffer of the right shape and is referenced by nothing but
the interpreter's environment (the interpreter names these *donors*).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np


class Arena:
    """Free float32 buffers by shape, and the buffers lent this run. Lent
    buffers are always whole arrays (never views), so that every view a
    kernel or the environment makes of one holds a reference to it."""

    def __init__(self):
        self._free: dict[tuple[int, ...], list[np.ndarray]] = {}
        self._lent: dict[int, np.ndarray] = {}
        self._donors: tuple[np.ndarray, ...] = ()
        self._placed: np.ndarray | None = None
        self._donor_base, self._free_base = self._probe()

    def place(self, view: np.ndarray | None) -> None:
        """Make the next kernel's `empty`/`output` of view's shape return
        `view` (a contiguous part of a buffer its result is to end up in)."""
        self._placed = view

    def empty(self, shape: tuple[int, ...]) -> np.ndarray:
        """An uninitialised float32 array of `shape`, recycled if possible."""
        shape = tuple(int(d) for d in shape)
        placed = self._placed
        if placed is not None and placed.shape == shape:
            self._placed = None
            return placed
        free = self._free.get(shape)
        buf = free.pop() if free else np.empty(shape, np.float32)
        self._lent[id(buf)] = buf
        return buf

    def output(self, shape: tuple[int, ...], args: Sequence, safe: Sequence[int]) -> np.ndarray:
        """A buffer for a result of `shape`: one of the operands args[i], i in
        `safe`, when it is a donor passed exactly once (the kernel must read
        those operands only element by element, before writing the output
        there, so that overwriting in place is exact), else `empty(shape)`."""
        shape = tuple(int(d) for d in shape)
        if self._placed is not None and self._placed.shape == shape:
            return self.empty(shape)
        for i in safe:
            a = args[i] if i < len(args) else None
            if a is None or a.shape != shape or not any(a is d for d in self._donors):
                continue
            if sum(x is a for x in args) == 1:
                return a
        return self.empty(shape)

    def pick_donors(self, env: dict, keys: Sequence) -> list[np.ndarray]:
        """The arrays env[k] (operands dying at the next op) that are lent
        buffers referenced by nothing but `env`; the next kernel's `output`
        may overwrite them."""
        donors = [env[k] for k in keys if self._donor_refs(env, k) == self._donor_base]
        self._donors = tuple(a for a in donors if a.flags.writeable)
        return list(self._donors)

    def collect(self) -> None:
        """Move every lent buffer nothing else references to the free list."""
        for key in [k for k in self._lent if self._free_refs(k) == self._free_base]:
            buf = self._lent.pop(key)
            self._free.setdefault(buf.shape, []).append(buf)

    def release(self) -> None:
        """Drop the free buffers (memory the OS may have back); lent ones
        stay tracked."""
        self._free.clear()

    def finish(self) -> None:
        """End of a run: buffers still lent escape (outputs); forget them."""
        self._donors = ()
        self.collect()
        self._lent.clear()

    def _donor_refs(self, env: dict, key) -> int:
        array = env[key]
        if self._lent.get(id(array)) is not array:
            return -1
        return sys.getrefcount(array)

    def _free_refs(self, key: int) -> int:
        return sys.getrefcount(self._lent[key])

    def _probe(self) -> tuple[int, int]:
        """The reference counts `_donor_refs` and `_free_refs` see for a
        buffer held by nobody else, measured rather than assumed (they depend
        on the interpreter's internals)."""
        buf = np.empty(1, np.float32)
        key = id(buf)
        self._lent[key] = buf
        env = {0: buf}
        del buf
        donor = self._donor_refs(env, 0)
        env.clear()
        free = self._free_refs(key)
        del self._lent[key]
        return donor, free
