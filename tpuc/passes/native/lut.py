"""Native rules of the lut family (filled in per op)."""
