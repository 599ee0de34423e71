"""Native rules of the norm family (filled in per op)."""
