"""Native rules of the requant family (filled in per op)."""
