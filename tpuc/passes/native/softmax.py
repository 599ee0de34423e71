"""Native rules of the softmax family (filled in per op)."""
