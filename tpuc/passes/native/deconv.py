"""Native rules of the deconv family (filled in per op)."""
