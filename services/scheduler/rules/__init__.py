"""The scheduler's pure rules: may a create be written, may a session be admitted, may it start
yet. No I/O, no clock, no writes: each decides on values handed in (``steps`` writes)."""
