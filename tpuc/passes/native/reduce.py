"""Native rules of the reduce family (filled in per op)."""
