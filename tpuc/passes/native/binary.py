"""Native rules of the binary family (filled in per op)."""
