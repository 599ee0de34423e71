"""Native rules of the gather family (filled in per op)."""
