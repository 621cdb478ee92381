"""The audit trail the log is: its seals (a signed hash chain), their verification, and the
invariants replayed over it."""
