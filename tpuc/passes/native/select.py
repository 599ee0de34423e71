"""Native rules of the select family (filled in per op)."""
