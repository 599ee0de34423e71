"""Native rules of the active family (filled in per op)."""
