"""The generic registry: explicit priority, never import order."""

from __future__ import annotations

import pytest

from tpuc.base.registry import DuplicateEntryError, Registry


def low(x):
    return "low"


def high(x):
    return "high"


def test_the_highest_priority_wins_whatever_the_order():
    first, second = Registry[str, object]("rules"), Registry[str, object]("rules")
    first.register("a", priority=1)(high)
    first.register("a")(low)
    second.register("a")(low)
    second.register("a", priority=1)(high)
    assert first.get("a") is second.get("a") is high
    assert first.all("a") == second.all("a") == [high, low]


def test_an_accidental_duplicate_raises_and_names_both():
    rules = Registry[str, object]("rules")
    rules.register("a")(low)
    with pytest.raises(
        DuplicateEntryError, match=r"rules: .a. is registered twice .*\(low and high\)"
    ):
        rules.register("a")(high)


def test_registering_the_same_function_again_is_harmless():
    rules = Registry[str, object]("rules")
    rules.register("a")(low)
    rules.register("a")(low)
    assert rules.all("a") == [low]


def test_mapping_reads_in_registration_order():
    rules = Registry[str, object]("rules")
    rules.register("b", "a")(low)
    assert list(rules) == ["b", "a"] and "a" in rules and "c" not in rules
    assert rules["a"] is low and rules.get("c", high) is high
    with pytest.raises(KeyError):
        rules["c"]
