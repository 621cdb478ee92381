"""Scheduler: session lifecycle, admission, placement, node ledger, sweeps.

``rules/`` and ``placement/`` decide and write nothing (pure); ``steps/`` turn decisions into
changes on a workspace (``workspace.py``) that a decision pass (``passes.py``) or a session
command commits; ``state/`` is the fold of the log they all read.
"""
