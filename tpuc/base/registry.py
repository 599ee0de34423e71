"""One registry type for every table keyed by op class, op type or name.

Kernels, lowering rules, command rules, converters … are registered with a
decorator from the module that implements them. Which entry wins for a key
must not depend on which module happened to be imported last, so each entry
carries an explicit priority: the highest priority wins, and two entries at
the same key and priority are an error (an accidental duplicate). `get`
returns the winner; `all` returns every entry of a key, highest priority
first, for tables whose rules all apply in turn.

This module imports nothing from tpuc but its errors, so every layer
(dialects, frontends, passes, interpreters) can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

from tpuc.base.errors import TpucError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F")
D = TypeVar("D")


class DuplicateEntryError(TpucError):
    """Two entries claim one key at the same priority."""


@dataclass(frozen=True)
class Entry(Generic[V]):
    value: V
    priority: int


class Registry(Generic[K, V]):
    """Values by key, each with a priority (see the module docstring).
    Iteration is in the order keys were first registered."""

    def __init__(self, what: str):
        self.what = what
        self._entries: dict[K, list[Entry[V]]] = {}

    def add(self, key: K, value: V, priority: int = 0) -> None:
        """Register `value` under `key`; raise on a tie with an entry there."""
        entries = self._entries.setdefault(key, [])
        for entry in entries:
            if entry.priority != priority:
                continue
            if entry.value is value:
                return  # the same registration again
            raise DuplicateEntryError(
                f"{self.what}: {_label(key)} is registered twice at priority {priority} "
                f"({_label(entry.value)} and {_label(value)}); give one a priority"
            )
        entries.append(Entry(value, priority))
        entries.sort(key=lambda e: -e.priority)  # stable: ties cannot exist

    def register(self, *keys: K, priority: int = 0) -> Callable[[F], F]:
        """Decorator: register the function under each key."""

        def decorate(fn: F) -> F:
            for key in keys:
                self.add(key, fn, priority)  # type: ignore[arg-type]
            return fn

        return decorate

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: object = None) -> object:
        """The highest-priority value of `key`, or `default`."""
        entries = self._entries.get(key)
        return entries[0].value if entries else default

    def all(self, key: K) -> list[V]:
        """Every value of `key`, highest priority first."""
        return [e.value for e in self._entries.get(key, ())]

    def __getitem__(self, key: K) -> V:
        entries = self._entries.get(key)
        if not entries:
            raise KeyError(key)
        return entries[0].value

    def __setitem__(self, key: K, value: V) -> None:
        """Make `value` the only entry of `key`: a deliberate override, as
        tests do with `monkeypatch.setitem` (which restores it the same way)."""
        self._entries[key] = [Entry(value, 0)]

    def __delitem__(self, key: K) -> None:
        del self._entries[key]

    def __contains__(self, key: object) -> bool:
        return bool(self._entries.get(key))  # type: ignore[call-overload]

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[K]:
        return list(self._entries)

    def items(self) -> list[tuple[K, V]]:
        """(key, winning value) pairs in registration order."""
        return [(k, entries[0].value) for k, entries in self._entries.items() if entries]


def _label(thing: object) -> str:
    """A readable name for a key or a registered value in messages."""
    if isinstance(thing, tuple):
        return "(" + ", ".join(_label(t) for t in thing) + ")"
    name = getattr(thing, "name", None)
    if isinstance(name, str):
        return name
    return getattr(thing, "__qualname__", None) or repr(thing)
