"""Native rules of the cast family (filled in per op)."""
