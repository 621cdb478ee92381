"""Scheduler: session lifecycle, admission, placement, node ledger, sweeps."""
