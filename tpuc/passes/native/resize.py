"""Native rules of the resize family (filled in per op)."""
