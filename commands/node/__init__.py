"""The ``node`` aggregate (``ev.node.<id>``), the scheduler's allocation ledger for one
machine: what it decides (``aggregate``), how each event evolves it (``events``), its value
types and errors (``rules``), its device-level rules (``devices``) and the operator's commands
on it (``messages``)."""
